//! Markdown tables and the number formats used in them.

/// A markdown table: a header row, then rows; columns after the first are right-aligned.
#[derive(Clone, Debug, Default)]
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table { headers: headers.iter().map(|h| h.to_string()).collect(), rows: Vec::new() }
    }

    /// Adds a row; missing cells are left empty, extra cells are an error of the caller.
    pub fn row(&mut self, cells: Vec<String>) {
        assert!(
            cells.len() <= self.headers.len(),
            "a row has more cells than the table has columns"
        );
        self.rows.push(cells);
    }

    /// GitHub-flavoured markdown.
    pub fn to_markdown(&self) -> String {
        let cell = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        out.push_str(&format!(
            "| {} |\n",
            self.headers.iter().map(|h| cell(h)).collect::<Vec<_>>().join(" | ")
        ));
        let rule: Vec<&str> =
            (0..self.headers.len()).map(|i| if i == 0 { "---" } else { "---:" }).collect();
        out.push_str(&format!("|{}|\n", rule.join("|")));
        for r in &self.rows {
            let mut cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
            cells.resize(self.headers.len(), String::new());
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out
    }
}

/// Thousands separated by commas: `1,234,567`; `-` when missing.
pub fn count(v: Option<f64>) -> String {
    let Some(v) = v else { return "-".into() };
    let n = v.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A ratio with two decimals, `-` when missing.
pub fn ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |r| format!("{r:.2}"))
}

/// A figure with `decimals` decimals, `-` when missing.
pub fn fixed(v: Option<f64>, decimals: usize) -> String {
    v.map_or("-".into(), |x| format!("{x:.decimals$}"))
}

/// Bytes as MiB with one decimal, `-` when missing.
pub fn mib(v: Option<f64>) -> String {
    v.map_or("-".into(), |b| format!("{:.1} MiB", b / 1_048_576.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_pipes_and_pads_rows() {
        let mut t = Table::new(&["benchmark", "ops/s"]);
        t.row(vec!["fillseq".into(), count(Some(1234567.4))]);
        t.row(vec!["a|b".into()]);
        assert_eq!(
            t.to_markdown(),
            "| benchmark | ops/s |\n|---|---:|\n| fillseq | 1,234,567 |\n| a\\|b |  |\n"
        );
    }

    #[test]
    fn number_formats() {
        assert_eq!(count(Some(999.0)), "999");
        assert_eq!(count(Some(1000.0)), "1,000");
        assert_eq!(count(Some(-1234.0)), "-1,234");
        assert_eq!(count(None), "-");
        assert_eq!(ratio(Some(1.234)), "1.23");
        assert_eq!(fixed(Some(2.0), 1), "2.0");
        assert_eq!(mib(Some(1_572_864.0)), "1.5 MiB");
    }
}
