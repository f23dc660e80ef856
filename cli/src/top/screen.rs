//! Drawing a [`Board`] (ratatui): two heading lines, then a table of the locks. The live
//! view draws it on the terminal every reading; `--once` draws it into a buffer as tall as
//! the rows and prints the buffer's text, so that a script reads what a person sees.

use std::time::{Duration, SystemTime};

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table, Widget};

use crate::status::millis;
use crate::top::board::{Board, Row, clock};

/// Cells of the lease bar.
const BAR_CELLS: usize = 10;

/// Lines above the table: the heading and the reading's state.
const HEADING_LINES: u16 = 2;

/// What the view shows beside the board.
pub struct Heading<'a> {
    /// The server's URL, its password left out.
    pub url: &'a str,
    pub pattern: &'a str,
    pub every: Duration,
    pub reading: &'a Reading,
    /// Whether `q` quits (not shown in a printed frame).
    pub live: bool,
}

/// The last reading's outcome.
pub enum Reading {
    /// None yet.
    Pending,
    /// Read at this time (this machine's clock).
    At(SystemTime),
    /// The last reading failed (the rows are the last good one's).
    Failed(String),
}

/// The lines a frame of `board` needs to show every row.
pub fn height_for(board: &Board) -> u16 {
    HEADING_LINES + 1 + u16::try_from(board.rows.len()).unwrap_or(u16::MAX - HEADING_LINES - 1)
}

/// Draws the frame into `buf` over `area`.
pub fn draw(area: Rect, buf: &mut Buffer, board: &Board, heading: &Heading<'_>) {
    let [top, table] = Layout::vertical([Constraint::Length(HEADING_LINES), Constraint::Fill(1)]).areas(area);
    Paragraph::new(heading_lines(board, heading)).render(top, buf);
    // The rows that fit below the table's header; the last line says how many do not.
    let room = usize::from(table.height.saturating_sub(1));
    let (shown, hidden) = if board.rows.len() > room {
        let shown = room.saturating_sub(1);
        (&board.rows[..shown], board.rows.len() - shown)
    } else {
        (&board.rows[..], 0)
    };
    // The name and holder columns as wide as their widest text shown (within bounds).
    let widest = |text: fn(&Row) -> &str, least: usize, most: usize| {
        let widest = shown.iter().map(|r| text(r).chars().count()).max().unwrap_or(0).clamp(least, most);
        Constraint::Length(u16::try_from(widest).unwrap_or(u16::MAX))
    };
    let widths = [
        widest(|r| &r.name, 4, 40),
        Constraint::Length(10),
        Constraint::Length(9),
        widest(|r| &r.holder, 6, 48),
        Constraint::Length(u16::try_from(BAR_CELLS).unwrap_or(10) + 12),
        Constraint::Length(11),
        Constraint::Fill(1),
    ];
    let header = TableRow::new(["NAME", "KIND", "STATE", "HOLDER", "LEASE LEFT", "WAITERS", "DETAIL"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<TableRow<'_>> = shown.iter().map(table_row).collect();
    let [table, more] = Layout::vertical([Constraint::Fill(1), Constraint::Length(u16::from(hidden > 0))]).areas(table);
    Widget::render(Table::new(rows, widths).header(header).column_spacing(2), table, buf);
    if hidden > 0 {
        Paragraph::new(format!("… and {hidden} more (fewer waiters)")).render(more, buf);
    }
}

fn heading_lines<'a>(board: &Board, heading: &Heading<'a>) -> Vec<Line<'a>> {
    let (held, waiting) = board.totals();
    let first = format!(
        "redlease top  {}  {}  {} locks, {held} held, {waiting} waiting",
        heading.url,
        heading.pattern,
        board.rows.len()
    );
    let every = humantime::format_duration(heading.every);
    let quit = if heading.live { "  q quits" } else { "" };
    let second = match heading.reading {
        Reading::Pending => format!("reading…{quit}"),
        Reading::At(at) => format!("read at {} UTC, every {every}{quit}", clock(*at)),
        Reading::Failed(error) => format!("cannot read ({error}); trying again every {every}{quit}"),
    };
    vec![Line::from(first).style(Style::new().add_modifier(Modifier::BOLD)), Line::from(second)]
}

fn table_row(row: &Row) -> TableRow<'_> {
    let waiters = match (row.waiters, row.waiters_are) {
        (0, _) => String::new(),
        (1, "clients") => "1 client".to_owned(),
        (n, counted) => format!("{n} {counted}"),
    };
    TableRow::new([
        Cell::from(row.name.as_str()),
        Cell::from(row.kind),
        Cell::from(row.state.as_str()),
        Cell::from(row.holder.as_str()),
        Cell::from(lease(row)),
        Cell::from(waiters),
        Cell::from(row.detail.as_str()),
    ])
}

/// `██████░░░░ 18s`: the lease left as a bar of [`BAR_CELLS`], then in whole seconds.
fn lease(row: &Row) -> String {
    match (row.lease_left, row.lease_share) {
        (Some(left), Some(share)) => {
            let full = ((share.clamp(0.0, 1.0) * BAR_CELLS as f64).round() as usize).min(BAR_CELLS);
            let seconds = millis(i64::try_from(left.as_millis() / 1000 * 1000).unwrap_or(i64::MAX));
            format!("{}{} {seconds}", "█".repeat(full), "░".repeat(BAR_CELLS - full))
        }
        (Some(left), None) => millis(i64::try_from(left.as_millis()).unwrap_or(i64::MAX)),
        _ => String::new(),
    }
}

/// The buffer's text, one line per row of cells, trailing blanks cut.
pub fn text_of(buf: &Buffer) -> String {
    let width = usize::from(buf.area.width).max(1);
    let mut out = String::new();
    for line in buf.content.chunks(width) {
        let text: String = line.iter().map(ratatui::buffer::Cell::symbol).collect();
        out.push_str(text.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use redlease::{Holder, LockInfo, LockKind, Waiter};

    use super::*;

    fn board(locks: usize) -> Board {
        let infos: Vec<LockInfo> = (0..locks)
            .map(|i| {
                let mut info = LockInfo::default();
                info.name = format!("jobs:{i}");
                info.kind = Some(LockKind::Fair);
                info.key_type = "hash".into();
                let mut h = Holder::default();
                h.owner = format!("client-{i}-uuid-long:3");
                h.holds = 1;
                info.holders = vec![h];
                info.lease_left = Some(Duration::from_millis(20_400));
                info.queue = (1..=i)
                    .map(|position| {
                        let mut w = Waiter::default();
                        w.position = position;
                        w
                    })
                    .collect();
                info
            })
            .collect();
        let mut board = Board::default();
        board.update(&infos, &HashMap::new());
        board
    }

    fn frame(board: &Board, width: u16, height: u16) -> String {
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        let reading = Reading::At(SystemTime::UNIX_EPOCH + Duration::from_secs(3_600));
        let heading = Heading {
            url: "redis://127.0.0.1:6379/",
            pattern: "jobs:*",
            every: Duration::from_secs(1),
            reading: &reading,
            live: true,
        };
        draw(area, &mut buf, board, &heading);
        text_of(&buf)
    }

    #[test]
    fn a_frame_shows_the_heading_the_columns_and_a_row_per_lock_most_waiters_first() {
        let text = frame(&board(3), 130, height_for(&board(3)));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(
            lines[0].starts_with("redlease top  redis://127.0.0.1:6379/  jobs:*  3 locks, 3 held, 3 waiting"),
            "{text}"
        );
        assert_eq!(lines[1], "read at 01:00:00 UTC, every 1s  q quits");
        for column in ["NAME", "KIND", "STATE", "HOLDER", "LEASE LEFT", "WAITERS", "DETAIL"] {
            assert!(lines[2].contains(column), "{column}: {text}");
        }
        assert!(lines[3].starts_with("jobs:2") && lines[3].contains("2 queued"), "{text}");
        assert!(lines[3].contains("███████░░░ 20s"), "20.4 s of 30: 7 cells of 10: {text}");
        assert!(lines[3].contains("client-2…:3 (unannounced)"), "{text}");
        assert!(lines[5].starts_with("jobs:0") && !lines[5].contains("queued"), "{text}");
    }

    #[test]
    fn rows_that_do_not_fit_are_counted_on_the_last_line() {
        let text = frame(&board(10), 130, 8);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 8);
        assert!(lines[3].starts_with("jobs:9"), "{text}");
        assert_eq!(lines[7], "… and 6 more (fewer waiters)", "{text}");
    }
}
