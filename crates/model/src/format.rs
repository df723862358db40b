//! Numbers as reports and console lines print them: `1,234`, `0.91x`,
//! `12 ms`. One place, so the report, the checkers' witnesses and the
//! console agree; a type's own words live with the type (an interval's in
//! compare.rs, a comparison's word in results.rs), so this module depends
//! on nothing.

/// `0.91x`, or `–` when there is no ratio.
pub fn format_ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.2}x"))
}

/// `12`, `0.5`, `0.333`: at most three decimals, no trailing zeros.
pub fn format_decimal(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Text made safe for one Markdown table cell or list item.
pub fn one_line(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}
