//! Hand-written SVG charts: grouped bars (ratios against targets) and lines (throughput over
//! time). Plain SVG 1.1 with no scripts or external fonts, so any browser or viewer shows it.

use std::fmt::Write;

const WIDTH: f64 = 960.0;
const HEIGHT: f64 = 420.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 220.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 70.0;
/// Series colours, in order (colour-blind-safe, after Okabe and Ito).
const COLOURS: [&str; 6] = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"];

/// One series of bars: a value per category, and optionally a target per category drawn as
/// a black tick across its bar.
#[derive(Clone, Debug)]
pub struct Bars {
    pub name: String,
    pub values: Vec<Option<f64>>,
    pub targets: Vec<Option<f64>>,
}

/// A grouped bar chart: one group per category, one bar per series.
#[derive(Clone, Debug)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub categories: Vec<String>,
    pub series: Vec<Bars>,
    /// A dashed horizontal line (1.0 for ratios).
    pub reference: Option<f64>,
}

/// One line of a line chart.
#[derive(Clone, Debug)]
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// A line chart with a shared x axis.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub lines: Vec<Line>,
}

/// Escapes text for an SVG text node or attribute.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A "nice" axis maximum and tick step covering `max` (1, 2 or 5 times a power of ten).
pub fn nice_axis(max: f64) -> (f64, f64) {
    let max = if max.is_finite() && max > 0.0 { max } else { 1.0 };
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(mag);
    ((max / step).ceil() * step, step)
}

/// A tick label: integers without decimals, large values with k/M.
fn tick_label(v: f64) -> String {
    if v >= 1e6 {
        format!("{}M", crate::summary::trim_float(v / 1e6))
    } else if v >= 1e4 {
        format!("{}k", crate::summary::trim_float(v / 1e3))
    } else {
        crate::summary::trim_float(v)
    }
}

fn open(out: &mut String, title: &str) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        esc(title)
    );
}

/// Y axis with gridlines from 0 to `max`; returns the function mapping a value to y.
fn y_axis(out: &mut String, max: f64, step: f64, label: &str) -> impl Fn(f64) -> f64 + use<> {
    let plot_h = HEIGHT - TOP - BOTTOM;
    let y = move |v: f64| TOP + plot_h * (1.0 - (v / max).clamp(0.0, 1.0));
    let mut v = 0.0;
    while v <= max * (1.0 + 1e-9) {
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#ddd"/><text x="{2}" y="{3:.1}" text-anchor="end">{4}</text>"##,
            y(v),
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(v) + 4.0,
            tick_label(v)
        );
        v += step;
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        esc(label)
    );
    let _ = writeln!(
        out,
        r##"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{0}" stroke="#333"/><line x1="{LEFT}" y1="{0}" x2="{1}" y2="{0}" stroke="#333"/>"##,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT
    );
    y
}

fn legend(out: &mut String, names: &[&str], extra: &[(&str, &str)]) {
    let x = WIDTH - RIGHT + 15.0;
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<rect x="{x}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{:.1}">{}</text>"#,
            y - 10.0,
            COLOURS[i % COLOURS.len()],
            x + 18.0,
            y,
            esc(name)
        );
    }
    for (j, (mark, text)) in extra.iter().enumerate() {
        let y = TOP + 10.0 + 20.0 * (names.len() + j) as f64;
        let _ = writeln!(out, r#"{mark}<text x="{}" y="{y:.1}">{}</text>"#, x + 18.0, esc(text));
    }
}

/// Renders a grouped bar chart.
pub fn bar_chart(c: &BarChart) -> String {
    let mut out = String::new();
    open(&mut out, &c.title);
    let max = c
        .series
        .iter()
        .flat_map(|s| s.values.iter().chain(&s.targets))
        .flatten()
        .copied()
        .chain(c.reference)
        .fold(0.0, f64::max);
    let (max, step) = nice_axis(max * 1.05);
    let y = y_axis(&mut out, max, step, &c.y_label);
    let plot_w = WIDTH - LEFT - RIGHT;
    let group_w = plot_w / c.categories.len().max(1) as f64;
    let bar_w = group_w * 0.8 / c.series.len().max(1) as f64;
    for (ci, cat) in c.categories.iter().enumerate() {
        let gx = LEFT + group_w * ci as f64 + group_w * 0.1;
        for (si, s) in c.series.iter().enumerate() {
            let x = gx + bar_w * si as f64;
            if let Some(v) = s.values.get(ci).copied().flatten() {
                let _ = writeln!(
                    out,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>{}: {}: {v:.3}</title></rect>"#,
                    y(v),
                    bar_w * 0.92,
                    y(0.0) - y(v),
                    COLOURS[si % COLOURS.len()],
                    esc(cat),
                    esc(&s.name)
                );
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                    x + bar_w * 0.46,
                    y(v) - 3.0,
                    format_value(v)
                );
            }
            if let Some(t) = s.targets.get(ci).copied().flatten() {
                let _ = writeln!(
                    out,
                    r#"<line x1="{x:.1}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="black" stroke-width="2.5"/>"#,
                    y(t),
                    x + bar_w * 0.92
                );
            }
        }
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + group_w * (ci as f64 + 0.5),
            HEIGHT - BOTTOM + 18.0,
            esc(cat)
        );
    }
    if let Some(r) = c.reference {
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1}" y2="{0:.1}" stroke="#c00" stroke-dasharray="6,4"/>"##,
            y(r),
            WIDTH - RIGHT
        );
    }
    let names: Vec<&str> = c.series.iter().map(|s| s.name.as_str()).collect();
    let tick = format!(
        r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="black" stroke-width="2.5"/>"#,
        WIDTH - RIGHT + 15.0,
        TOP + 4.0 + 20.0 * names.len() as f64,
        WIDTH - RIGHT + 27.0
    );
    let mut extra = vec![(tick.as_str(), "target")];
    let refline = format!(
        r##"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#c00" stroke-dasharray="6,4"/>"##,
        WIDTH - RIGHT + 15.0,
        TOP + 24.0 + 20.0 * names.len() as f64,
        WIDTH - RIGHT + 27.0
    );
    if c.reference.is_some() {
        extra.push((refline.as_str(), "parity"));
    }
    legend(&mut out, &names, &extra);
    out.push_str("</svg>\n");
    out
}

fn format_value(v: f64) -> String {
    if v.abs() >= 100.0 { tick_label(v.round()) } else { format!("{v:.2}") }
}

/// Renders a line chart; x from 0 to the largest x of any line.
pub fn line_chart(c: &LineChart) -> String {
    let mut out = String::new();
    open(&mut out, &c.title);
    let points = || c.lines.iter().flat_map(|l| l.points.iter());
    let y_max = points().map(|p| p.1).fold(0.0, f64::max);
    let x_max = points().map(|p| p.0).fold(0.0, f64::max);
    let (y_max, y_step) = nice_axis(y_max * 1.05);
    let (x_max, x_step) = nice_axis(x_max);
    let y = y_axis(&mut out, y_max, y_step, &c.y_label);
    let plot_w = WIDTH - LEFT - RIGHT;
    let x = |v: f64| LEFT + plot_w * (v / x_max).clamp(0.0, 1.0);
    let mut v = 0.0;
    while v <= x_max * (1.0 + 1e-9) {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x(v),
            HEIGHT - BOTTOM + 18.0,
            tick_label(v)
        );
        v += x_step;
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - BOTTOM + 40.0,
        esc(&c.x_label)
    );
    for (i, line) in c.lines.iter().enumerate() {
        let pts: Vec<String> =
            line.points.iter().map(|(px, py)| format!("{:.1},{:.1}", x(*px), y(*py))).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-width="1.8" points="{}"><title>{}</title></polyline>"#,
            COLOURS[i % COLOURS.len()],
            pts.join(" "),
            esc(&line.name)
        );
    }
    let names: Vec<&str> = c.lines.iter().map(|l| l.name.as_str()).collect();
    legend(&mut out, &names, &[]);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_are_nice() {
        assert_eq!(nice_axis(1.0), (1.0, 0.2));
        assert_eq!(nice_axis(2.6), (3.0, 1.0));
        assert_eq!(nice_axis(240_000.0), (250_000.0, 50_000.0));
        assert_eq!(nice_axis(0.0), (1.0, 0.2));
        assert_eq!(tick_label(250_000.0), "250k");
        assert_eq!(tick_label(0.4), "0.4");
        assert_eq!(tick_label(2_000_000.0), "2M");
    }

    /// Parses as XML well enough: every element opened is closed, in order.
    fn balanced(svg: &str) -> bool {
        let mut stack: Vec<String> = Vec::new();
        let mut rest = svg;
        while let Some(i) = rest.find('<') {
            let end = rest[i..].find('>').map(|e| i + e);
            let Some(end) = end else { return false };
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

    #[test]
    fn bar_chart_draws_bars_targets_and_escapes() {
        let c = BarChart {
            title: "shale / RocksDB <ops/s>".into(),
            y_label: "ratio".into(),
            categories: vec!["fillseq".into(), "readrandom".into()],
            series: vec![
                Bars {
                    name: "vs buffered".into(),
                    values: vec![Some(0.5), Some(1.3)],
                    targets: vec![Some(1.5), Some(1.0)],
                },
                Bars {
                    name: "vs direct".into(),
                    values: vec![None, Some(3.1)],
                    targets: vec![Some(1.5), Some(1.2)],
                },
            ],
            reference: Some(1.0),
        };
        let svg = bar_chart(&c);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(balanced(&svg), "{svg}");
        assert!(svg.contains("&lt;ops/s&gt;"));
        // Three bars (one value is missing), four target ticks and the parity line.
        assert_eq!(svg.matches("<rect x=").count(), 3 + 2, "bars plus legend swatches");
        assert_eq!(svg.matches(r#"stroke="black" stroke-width="2.5""#).count(), 4 + 1);
        assert!(svg.contains("<title>readrandom: vs direct: 3.100</title>"));
    }

    #[test]
    fn line_chart_has_one_polyline_per_line() {
        let c = LineChart {
            title: "fillrandom".into(),
            x_label: "seconds".into(),
            y_label: "ops/s".into(),
            lines: vec![
                Line { name: "RocksDB".into(), points: vec![(0.0, 10.0), (1.0, 20.0)] },
                Line { name: "shale".into(), points: vec![(0.0, 5.0), (1.0, 0.0), (2.0, 7.0)] },
            ],
        };
        let svg = line_chart(&c);
        assert!(balanced(&svg), "{svg}");
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(r#"<title>shale</title>"#));
    }
}
