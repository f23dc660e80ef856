//! `redlease top [PATTERN]`: the locks matching a pattern, live in the terminal (refreshed
//! every `--interval`, quitting on `q`), or one frame printed with `--once`.
//!
//! A thread of its own reads Redis (`Client::locks`, and each election's leader) and hands
//! each reading to the screen's loop, which only draws and reads keys: a slow or absent
//! server never keeps `q` from quitting, and a failed reading is shown while the last good
//! rows stay on screen.

mod board;
mod screen;

use std::collections::HashMap;
use std::io::{IsTerminal, Write as _};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime};

use ratatui::buffer::Buffer;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use redlease::{Client, LockInfo, LockKind};

use crate::args::TopArgs;
use crate::connect::Settings;
use crate::exit::{self, Failure};
use crate::names;
use crate::top::board::Board;
use crate::top::screen::{Heading, Reading};

/// Width of a frame printed off a terminal.
const PRINTED_WIDTH: u16 = 160;

/// How often the screen's loop looks for a key and a new reading.
const KEY_POLL: Duration = Duration::from_millis(100);

pub fn top(args: &TopArgs) -> Result<u8, Failure> {
    if args.interval.is_zero() {
        return Err(Failure::usage("--interval must be longer than 0"));
    }
    let pattern = args.pattern.as_deref().unwrap_or("*");
    // Checked here, not left to each reading: the live view would show the refusal forever.
    if pattern.is_empty() || pattern.len() > names::MAX_NAME_LEN {
        return Err(Failure::usage(format!(
            "the pattern must be 1 to {} bytes long, not {}",
            names::MAX_NAME_LEN,
            pattern.len()
        )));
    }
    if !args.once && !std::io::stdout().is_terminal() {
        return Err(Failure::usage("the live view needs a terminal; --once prints one frame"));
    }
    let settings = Settings::from_args(&args.connection)?;
    let client = settings.client(None, None)?;
    let url = redlease::redact_url(&args.connection.url);
    if args.once {
        let (infos, leaders) = read(&client, pattern)
            .map_err(|e| Failure::from_lock_error(&format!("cannot list {}", exit::shown(pattern)), &e))?;
        client.shutdown();
        let mut board = Board::default();
        board.update(&infos, &leaders);
        let reading = Reading::At(SystemTime::now());
        print_frame(&board, &Heading { url: &url, pattern, every: args.interval, reading: &reading, live: false });
        return Ok(exit::OK);
    }
    live(client, &url, pattern, args.interval)
}

type Locks = (Vec<LockInfo>, HashMap<String, String>);

/// The locks matching `pattern`, and the value each election's leader advertises.
fn read(client: &Client, pattern: &str) -> redlease::Result<Locks> {
    let infos = client.locks(pattern)?;
    let mut leaders = HashMap::new();
    for info in infos.iter().filter(|i| i.kind == Some(LockKind::Election) && i.is_held()) {
        // A leader gone between the two reads shows without its value.
        if let Ok(Some(leader)) = client.election(info.name.as_str()).leader() {
            leaders.insert(info.name.clone(), leader.value);
        }
    }
    Ok((infos, leaders))
}

/// Prints one frame as tall as its rows, as wide as the terminal (or [`PRINTED_WIDTH`]).
fn print_frame(board: &Board, heading: &Heading<'_>) {
    let width = rustix::termios::tcgetwinsize(std::io::stdout())
        .ok()
        .map(|size| size.ws_col)
        .filter(|&cols| cols > 0)
        .unwrap_or(PRINTED_WIDTH);
    let area = Rect::new(0, 0, width, screen::height_for(board));
    let mut buf = Buffer::empty(area);
    screen::draw(area, &mut buf, board, heading);
    let mut stdout = std::io::stdout().lock();
    // A closed stdout (`| head`) is not worth a failure.
    let _ = stdout.write_all(screen::text_of(&buf).as_bytes()).and_then(|()| stdout.flush());
}

/// The live view, until `q` (or Esc, or Ctrl-C).
fn live(client: Client, url: &str, pattern: &str, every: Duration) -> Result<u8, Failure> {
    let (readings, received) = mpsc::channel();
    let owned = pattern.to_owned();
    // Ends when the view has gone (its send fails), or with the process.
    thread::spawn(move || {
        loop {
            let reading = read(&client, &owned).map_err(|e| e.to_string());
            if readings.send((reading, SystemTime::now())).is_err() {
                return;
            }
            thread::sleep(every);
        }
    });
    let mut terminal =
        ratatui::try_init().map_err(|e| Failure::new(exit::SOFTWARE, format!("cannot use the terminal: {e}")))?;
    let mut board = Board::default();
    let mut reading = Reading::Pending;
    let outcome = loop {
        while let Ok((read, at)) = received.try_recv() {
            match read {
                Ok((infos, leaders)) => {
                    board.update(&infos, &leaders);
                    reading = Reading::At(at);
                }
                Err(error) => reading = Reading::Failed(error),
            }
        }
        let heading = Heading { url, pattern, every, reading: &reading, live: true };
        if let Err(e) = terminal.draw(|frame| screen::draw(frame.area(), frame.buffer_mut(), &board, &heading)) {
            break Err(e);
        }
        match quit_key(KEY_POLL) {
            Ok(true) => break Ok(()),
            Ok(false) => {}
            Err(e) => break Err(e),
        }
    };
    ratatui::restore();
    outcome.map(|()| exit::OK).map_err(|e| Failure::new(exit::SOFTWARE, format!("the terminal failed: {e}")))
}

/// Waits up to `wait` for a key; whether it was one that quits.
fn quit_key(wait: Duration) -> std::io::Result<bool> {
    if !event::poll(wait)? {
        return Ok(false);
    }
    Ok(match event::read()? {
        Event::Key(key) if key.kind != KeyEventKind::Release => match key.code {
            KeyCode::Char('q') | KeyCode::Char('Q') | KeyCode::Esc => true,
            KeyCode::Char('c') => key.modifiers.contains(KeyModifiers::CONTROL),
            _ => false,
        },
        _ => false,
    })
}
