//! The curves as pictures: SVG files drawn with `plotters`, one chart per file, log-log
//! where the axes span decades. No experiment lives here; the curves' steps hand their
//! points over.

use std::path::{Path, PathBuf};
use std::process::Command;

use plotters::prelude::*;

use crate::machine::Machine;
use crate::plan::WRITE_DOC_ENV;

/// One line of a chart: its name in the legend and its points (x, y), both above zero.
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// A log-log chart: its file name, title, axes and lines, and the caption under it.
pub(crate) struct LogLogChart<'a> {
    pub(crate) file: &'a str,
    pub(crate) title: &'a str,
    pub(crate) x_label: &'a str,
    pub(crate) y_label: &'a str,
    pub(crate) series: Vec<Series>,
}

/// Where the pictures go: docs/curves/ when the run writes the docs
/// (`REDLEASE_BENCH_WRITE_DOC=1`), target/bench-curves/ otherwise, so that a run to
/// compare builds leaves the committed pictures alone.
pub(crate) fn curves_dir() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if std::env::var(WRITE_DOC_ENV).is_ok_and(|v| v == "1") {
        root.join("docs").join("curves")
    } else {
        root.join("target").join("bench-curves")
    }
}

/// The machine and the commit, under each picture's title.
pub(crate) fn caption() -> String {
    let m = Machine::read();
    format!("{} CPUs ({}), Linux {}, {}; commit {}", m.cpus, m.model, m.kernel, m.redis, commit())
}

/// The commit the benchmark was built from (`git describe`), for the captions.
pub(crate) fn commit() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(|| "unknown".to_string(), |o| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// Draws each of `charts` and links it from `out` (a line saying why where it could not be
/// drawn), as the report shows a curve's pictures.
pub(crate) fn draw_into(out: &mut String, charts: impl IntoIterator<Item = LogLogChart<'static>>) {
    use std::fmt::Write as _;
    let caption = caption();
    for chart in charts {
        let _ = match chart.draw(&caption) {
            Ok(_) => writeln!(out, "![{}](curves/{})\n", chart.title, chart.file),
            Err(why) => writeln!(out, "({} not drawn: {why})\n", chart.file),
        };
    }
}

impl LogLogChart<'_> {
    /// Draws the chart into [`curves_dir`], with `caption` (the machine and the commit)
    /// under the title; the path written, or why not.
    pub(crate) fn draw(&self, caption: &str) -> Result<PathBuf, String> {
        let dir = curves_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(self.file);
        self.draw_to(&path, caption).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    fn draw_to(&self, path: &Path, caption: &str) -> Result<(), Box<dyn std::error::Error>> {
        let points = self.series.iter().flat_map(|s| s.points.iter().copied());
        let (x, y) = bounds(points).ok_or("no point above zero to draw")?;
        let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
        root.fill(&WHITE)?;
        let (head, body) = root.split_vertically(56);
        head.draw(&Text::new(self.title.to_string(), (12, 8), ("sans-serif", 20)))?;
        head.draw(&Text::new(caption.to_string(), (12, 34), ("sans-serif", 12).into_font().color(&BLACK.mix(0.6))))?;
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((x.0..x.1).log_scale(), (y.0..y.1).log_scale())?;
        chart.configure_mesh().x_desc(self.x_label).y_desc(self.y_label).draw()?;
        for (i, series) in self.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let points: Vec<(f64, f64)> = series.points.iter().copied().filter(|&(x, y)| x > 0.0 && y > 0.0).collect();
            chart
                .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
                .label(series.name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2)));
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()?;
        root.present()?;
        Ok(())
    }
}

/// The ranges of the points above zero, widened to whole decades: ((x min, x max), (y
/// min, y max)); `None` when there is no such point.
fn bounds(points: impl Iterator<Item = (f64, f64)>) -> Option<((f64, f64), (f64, f64))> {
    let (mut x, mut y) = ((f64::INFINITY, 0.0f64), (f64::INFINITY, 0.0f64));
    for (px, py) in points.filter(|&(px, py)| px > 0.0 && py > 0.0 && px.is_finite() && py.is_finite()) {
        x = (x.0.min(px), x.1.max(px));
        y = (y.0.min(py), y.1.max(py));
    }
    // A range of at least one decade, from the decade at or below its least point to the
    // one at or above its greatest.
    let decades = |(low, high): (f64, f64)| {
        let below = 10f64.powf(low.log10().floor());
        (below, 10f64.powf(high.log10().ceil()).max(below * 10.0))
    };
    x.0.is_finite().then(|| (decades(x), decades(y)))
}
