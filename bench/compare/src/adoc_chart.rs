//! The charts of bench/adoc.sh (issue #10, part 3): a run's seconds on one time axis, as
//! ADOC's figures show them: throughput, the stall time that ended in each second (stacked by
//! kind), and the two knobs the tuner turns (background threads, memtable size), with a
//! marker at each second whose `tuner` column names an overflow (labelled where the label
//! changes). One SVG per run, and one per point (device and workload) with every run of that
//! point side by side, RocksDB's left and shale's right. All charts of one point share their
//! scales ([`Scales::of`]), so runs compare by eye. Plain SVG 1.1, no scripts or fonts.

use std::fmt::Write as _;

use crate::adoc_series::{KIND_TITLES, OVERFLOWS, Second};
use crate::svg::nice_axis;

/// Colours of the stall kinds, in [`crate::adoc_series::KINDS`] order (after Okabe and Ito).
const KIND_COLOURS: [&str; 5] = ["#E69F00", "#56B4E9", "#D55E00", "#009E73", "#CC79A7"];
/// Colours of the tuner's overflows, in [`OVERFLOWS`] order.
const OVERFLOW_COLOURS: [&str; 3] = ["#7B3294", "#1B7837", "#B35806"];
const OPS_COLOUR: &str = "#0072B2";
const JOBS_COLOUR: &str = "#333333";
const BATCH_COLOUR: &str = "#CC79A7";

/// Escapes text for an SVG text node or attribute.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A tick label: k and M for large values, no needless decimals.
fn label(v: f64) -> String {
    let trim = |x: f64| crate::summary::trim_float(x);
    if v >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

/// The scales of every chart of one point.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scales {
    /// Seconds.
    pub x_max: f64,
    /// Operations per second.
    pub ops_max: f64,
    /// Stall milliseconds in one second.
    pub stall_ms_max: f64,
    /// Background threads.
    pub jobs_max: f64,
    /// Memtable MiB.
    pub batch_mib_max: f64,
}

impl Scales {
    /// Scales that hold every series given.
    pub fn of<'a>(series: impl IntoIterator<Item = &'a [Second]>) -> Scales {
        let mut s = Scales {
            x_max: 1.0,
            ops_max: 1.0,
            stall_ms_max: 1.0,
            jobs_max: 1.0,
            batch_mib_max: 1.0,
        };
        for rows in series {
            for r in rows {
                s.x_max = s.x_max.max(r.second as f64);
                s.ops_max = s.ops_max.max(r.ops.unwrap_or(0.0));
                s.stall_ms_max = s.stall_ms_max.max(r.stall_us_total() / 1000.0);
                s.jobs_max = s.jobs_max.max(r.background_jobs.unwrap_or(0.0));
                s.batch_mib_max =
                    s.batch_mib_max.max(r.write_buffer_bytes.unwrap_or(0.0) / 1_048_576.0);
            }
        }
        s
    }
}

/// One run to draw.
#[derive(Clone, Debug)]
pub struct RunChart<'a> {
    pub title: String,
    pub rows: &'a [Second],
    /// Lines of figures printed under the panels of a run's own chart.
    pub totals: Vec<String>,
}

/// A rectangle of the drawing and the ranges it maps.
struct Frame {
    x: f64,
    y: f64,
    w: f64,
    h: f64,
    x_max: f64,
    y_max: f64,
    y_step: f64,
}

impl Frame {
    fn new(x: f64, y: f64, w: f64, h: f64, x_max: f64, y_max: f64) -> Frame {
        let (y_max, y_step) = nice_axis(y_max * 1.05);
        let (x_max, _) = nice_axis(x_max);
        Frame { x, y, w, h, x_max, y_max, y_step }
    }

    fn px(&self, v: f64) -> f64 {
        self.x + self.w * (v / self.x_max).clamp(0.0, 1.0)
    }

    fn py(&self, v: f64) -> f64 {
        self.y + self.h * (1.0 - (v / self.y_max).clamp(0.0, 1.0))
    }

    /// Gridlines, the left axis's ticks and label, the frame; x labels if asked.
    fn axes(&self, out: &mut String, y_label: &str, x_labels: bool) {
        let mut v = 0.0;
        while v <= self.y_max * (1.0 + 1e-9) {
            let _ = writeln!(
                out,
                r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end" font-size="10">{}</text>"##,
                self.x,
                self.x + self.w,
                self.x - 4.0,
                self.py(v) + 3.5,
                label(v),
                y = self.py(v)
            );
            v += self.y_step;
        }
        let _ = writeln!(
            out,
            r#"<text transform="translate({:.1},{:.1}) rotate(-90)" text-anchor="middle" font-size="11">{}</text>"#,
            self.x - 42.0,
            self.y + self.h / 2.0,
            esc(y_label)
        );
        let _ = writeln!(
            out,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="none" stroke="#555"/>"##,
            self.x, self.y, self.w, self.h
        );
        if x_labels {
            let (_, step) = nice_axis(self.x_max);
            let mut t = 0.0;
            while t <= self.x_max * (1.0 + 1e-9) {
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                    self.px(t),
                    self.y + self.h + 13.0,
                    label(t)
                );
                t += step;
            }
        }
    }
}

/// The throughput line, each second's point at its end, and the tuner's markers along the
/// panel's top.
fn throughput_panel(out: &mut String, f: &Frame, rows: &[Second], x_labels: bool) {
    f.axes(out, "ops/s", x_labels);
    let pts: Vec<String> = rows
        .iter()
        .filter_map(|r| r.ops.map(|o| format!("{:.1},{:.1}", f.px(r.second as f64), f.py(o))))
        .collect();
    if !pts.is_empty() {
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{OPS_COLOUR}" stroke-width="1.5" points="{}"/>"#,
            pts.join(" ")
        );
    }
    let mut last = "";
    for r in rows {
        let Some(i) = OVERFLOWS.iter().position(|o| *o == r.tuner) else {
            last = "";
            continue;
        };
        let x = f.px(r.second as f64 - 0.5);
        let _ = writeln!(
            out,
            r#"<path d="M{:.1},{:.1} l-3,-6 h6 z" fill="{}"><title>second {}: {}</title></path>"#,
            x,
            f.y + 7.0,
            OVERFLOW_COLOURS[i],
            r.second,
            esc(&r.tuner)
        );
        if r.tuner != last {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="9" fill="{}">{}</text>"#,
                x + 2.0,
                f.y + 16.0,
                OVERFLOW_COLOURS[i],
                esc(&r.tuner)
            );
        }
        last = &r.tuner;
    }
}

/// Each second's stall milliseconds as a bar stacked by kind.
fn stall_panel(out: &mut String, f: &Frame, rows: &[Second], x_labels: bool) {
    f.axes(out, "stall ms", x_labels);
    let bar = (f.w / f.x_max * 0.9).max(0.5);
    for r in rows {
        let x = f.px(r.second as f64) - bar;
        let mut base = 0.0;
        let known: f64 = r.stall_us.iter().flatten().sum();
        let mut parts: Vec<(f64, &str, &str)> = r
            .stall_us
            .iter()
            .enumerate()
            .filter_map(|(k, v)| {
                v.filter(|v| *v > 0.0).map(|v| (v, KIND_COLOURS[k], KIND_TITLES[k]))
            })
            .collect();
        // A total the kinds do not cover (RocksDB's tail before any count rose) in grey.
        let rest = r.stall_us_total() - known;
        if rest > 0.5 {
            parts.push((rest, "#999999", "kind unknown"));
        }
        for (us, colour, name) in parts {
            let ms = us / 1000.0;
            let (top, bottom) = (f.py(base + ms), f.py(base));
            let _ = writeln!(
                out,
                r#"<rect x="{x:.1}" y="{top:.1}" width="{bar:.1}" height="{:.1}" fill="{colour}"><title>second {}: {name} {ms:.1} ms</title></rect>"#,
                (bottom - top).max(0.3),
                r.second
            );
            base += ms;
        }
    }
}

/// Background threads (left axis) and memtable MiB (right axis) as steps.
fn knobs_panel(out: &mut String, f: &Frame, batch: &Frame, rows: &[Second]) {
    f.axes(out, "threads", true);
    let mut v = 0.0;
    while v <= batch.y_max * (1.0 + 1e-9) {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" fill="{BATCH_COLOUR}">{}</text>"#,
            f.x + f.w + 4.0,
            batch.py(v) + 3.5,
            label(v)
        );
        v += batch.y_step;
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate({:.1},{:.1}) rotate(90)" text-anchor="middle" font-size="11" fill="{BATCH_COLOUR}">memtable MiB</text>"#,
        f.x + f.w + 40.0,
        f.y + f.h / 2.0
    );
    let steps = |frame: &Frame, value: &dyn Fn(&Second) -> Option<f64>| -> String {
        let mut pts = Vec::new();
        for r in rows {
            if let Some(v) = value(r) {
                let y = frame.py(v);
                pts.push(format!("{:.1},{y:.1}", f.px(r.second as f64 - 1.0)));
                pts.push(format!("{:.1},{y:.1}", f.px(r.second as f64)));
            }
        }
        pts.join(" ")
    };
    let jobs = steps(f, &|r| r.background_jobs);
    let mib = steps(batch, &|r| r.write_buffer_bytes.map(|b| b / 1_048_576.0));
    if !jobs.is_empty() {
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{JOBS_COLOUR}" stroke-width="1.5" points="{jobs}"/>"#
        );
    }
    if !mib.is_empty() {
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{BATCH_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3" points="{mib}"/>"#
        );
    }
}

/// The key of kinds, overflows and lines, at (x, y), `per_row` entries a row.
fn key(out: &mut String, x: f64, y: f64, knobs: bool) {
    let mut items: Vec<(String, String)> = KIND_TITLES
        .iter()
        .zip(KIND_COLOURS)
        .map(|(t, c)| {
            (format!(r#"<rect width="10" height="10" y="-9" fill="{c}"/>"#), t.to_string())
        })
        .collect();
    for (o, c) in OVERFLOWS.iter().zip(OVERFLOW_COLOURS) {
        items.push((format!(r#"<path d="M5,1 l-4,-8 h8 z" fill="{c}"/>"#), format!("tuner: {o}")));
    }
    if knobs {
        items.push((
            format!(r#"<line x1="0" y1="-4" x2="12" y2="-4" stroke="{JOBS_COLOUR}" stroke-width="1.5"/>"#),
            "threads".into(),
        ));
        items.push((
            format!(r#"<line x1="0" y1="-4" x2="12" y2="-4" stroke="{BATCH_COLOUR}" stroke-width="1.5" stroke-dasharray="5,3"/>"#),
            "memtable".into(),
        ));
    }
    let mut cx = x;
    for (mark, text) in items {
        let _ = writeln!(
            out,
            r#"<g transform="translate({cx:.1},{y:.1})">{mark}<text x="15" y="0" font-size="10">{}</text></g>"#,
            esc(&text)
        );
        cx += 22.0 + 6.0 * text.len() as f64;
    }
}

fn open(out: &mut String, w: f64, h: f64, title: &str) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        w / 2.0,
        esc(title)
    );
}

/// One run's chart: throughput, stalls and knobs on one time axis, its totals beneath.
pub fn run_svg(c: &RunChart<'_>, s: &Scales) -> String {
    let (w, left, right) = (960.0, 70.0, 70.0);
    let pw = w - left - right;
    let h = 590.0 + 16.0 * c.totals.len() as f64;
    let mut out = String::new();
    open(&mut out, w, h, &c.title);
    let ops = Frame::new(left, 45.0, pw, 190.0, s.x_max, s.ops_max);
    throughput_panel(&mut out, &ops, c.rows, false);
    let stall = Frame::new(left, 250.0, pw, 140.0, s.x_max, s.stall_ms_max);
    stall_panel(&mut out, &stall, c.rows, false);
    let jobs = Frame::new(left, 405.0, pw, 100.0, s.x_max, s.jobs_max);
    let batch = Frame::new(left, 405.0, pw, 100.0, s.x_max, s.batch_mib_max);
    knobs_panel(&mut out, &jobs, &batch, c.rows);
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="538" text-anchor="middle" font-size="11">seconds</text>"#,
        left + pw / 2.0
    );
    key(&mut out, left, 562.0, true);
    for (i, line) in c.totals.iter().enumerate() {
        let _ = writeln!(
            out,
            r#"<text x="{left}" y="{:.1}" font-size="11">{}</text>"#,
            588.0 + 16.0 * i as f64,
            esc(line)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// A point's runs side by side: `left` (RocksDB's) in the first column, `right` (shale's) in
/// the second, each a throughput and a stall panel on the point's scales.
pub fn grid_svg(title: &str, left: &[RunChart<'_>], right: &[RunChart<'_>], s: &Scales) -> String {
    let (cell_w, cell_h, margin) = (600.0, 290.0, 70.0);
    let rows = left.len().max(right.len()).max(1);
    let w = 2.0 * cell_w + 40.0;
    let h = 60.0 + cell_h * rows as f64 + 30.0;
    let mut out = String::new();
    open(&mut out, w, h, title);
    for (col, charts) in [left, right].into_iter().enumerate() {
        for (i, c) in charts.iter().enumerate() {
            let x = 20.0 + cell_w * col as f64 + margin;
            let y = 50.0 + cell_h * i as f64;
            let pw = cell_w - margin - 20.0;
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-weight="bold">{}</text>"#,
                x + pw / 2.0,
                y + 8.0,
                esc(&c.title)
            );
            let ops = Frame::new(x, y + 16.0, pw, 130.0, s.x_max, s.ops_max);
            throughput_panel(&mut out, &ops, c.rows, false);
            let stall = Frame::new(x, y + 156.0, pw, 90.0, s.x_max, s.stall_ms_max);
            stall_panel(&mut out, &stall, c.rows, true);
            if let Some(line) = c.totals.first() {
                let _ = writeln!(
                    out,
                    r#"<text x="{x:.1}" y="{:.1}" font-size="10">{}</text>"#,
                    y + 276.0,
                    esc(line)
                );
            }
        }
    }
    key(&mut out, 90.0, h - 12.0, false);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element opened is closed, in order.
    fn balanced(svg: &str) -> bool {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            let Some(end) = rest[i..].find('>').map(|e| i + e) else { return false };
            let tag = &rest[i + 1..end];
            if let Some(name) = tag.strip_prefix('/') {
                if stack.pop().as_deref() != Some(name.trim()) {
                    return false;
                }
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap_or("").to_string());
            }
            rest = &rest[end + 1..];
        }
        stack.is_empty()
    }

    fn rows() -> Vec<Second> {
        (1..=6)
            .map(|s| Second {
                second: s,
                ops: Some(1000.0 * s as f64),
                background_jobs: Some(2.0 + (s / 3) as f64 * 2.0),
                write_buffer_bytes: Some(64.0 * 1_048_576.0),
                stall_us: [
                    Some(if s == 2 { 250_000.0 } else { 0.0 }),
                    Some(0.0),
                    Some(0.0),
                    None,
                    None,
                ],
                tuner: match s {
                    3 | 4 => "L0O".into(),
                    5 => "MMO".into(),
                    _ => String::new(),
                },
                ..Default::default()
            })
            .collect()
    }

    #[test]
    fn a_run_chart_marks_each_tuner_second_and_labels_changes() {
        let r = rows();
        let s = Scales::of([r.as_slice()]);
        assert_eq!((s.x_max, s.ops_max, s.stall_ms_max, s.jobs_max), (6.0, 6000.0, 250.0, 6.0));
        let c = RunChart {
            title: "hdd <fillrandom>".into(),
            rows: &r,
            totals: vec!["ops/s 3,500".into()],
        };
        let svg = run_svg(&c, &s);
        assert!(balanced(&svg), "{svg}");
        assert!(svg.contains("hdd &lt;fillrandom&gt;"));
        // A marker for each of the three seconds with an answer, and one stall bar.
        assert_eq!(svg.matches("<title>second ").count(), 3 + 1);
        assert_eq!(svg.matches(">L0O</text>").count(), 1);
        assert_eq!(svg.matches(">MMO</text>").count(), 1);
        assert!(svg.contains("<title>second 2: memtable 250.0 ms</title>"));
        assert!(svg.contains("ops/s 3,500"));
        assert_eq!(svg.matches("<polyline").count(), 3, "ops, threads, memtable");
    }

    #[test]
    fn a_grid_holds_both_columns_on_one_scale() {
        let r = rows();
        let empty: Vec<Second> = Vec::new();
        let s = Scales::of([r.as_slice(), empty.as_slice()]);
        let left = [RunChart { title: "rocksdb-default".into(), rows: &r, totals: vec![] }];
        let right = [
            RunChart { title: "shale-off".into(), rows: &r, totals: vec!["x".into()] },
            RunChart { title: "shale-adoc".into(), rows: &empty, totals: vec![] },
        ];
        let svg = grid_svg("sata fillrandom", &left, &right, &s);
        assert!(balanced(&svg), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 2, "the empty run draws no line");
        assert!(svg.contains(">shale-adoc</text>"));
    }
}
