//! Numbers and words as reports and console lines print them: `1,234`,
//! `0.91x`, `0.88–0.94`, **WIN**. One place, so the report, the checkers'
//! witnesses and the console agree.

use crate::results::Word;

/// `0.91x`, or `–` when there is no ratio.
pub fn format_ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |v| format!("{v:.2}x"))
}

/// `0.88–0.94`, or `–` without an interval (fewer than two repeats).
pub fn format_interval(v: Option<crate::compare::Interval>) -> String {
    v.map_or_else(|| "–".into(), |i| format!("{:.2}–{:.2}", i.low, i.high))
}

/// The word, or `inconclusive` when the interval crosses an edge of the band.
pub fn format_word(w: Option<Word>) -> String {
    match w {
        Some(Word::Win) => "**WIN**".into(),
        Some(Word::Parity) => "parity".into(),
        Some(Word::Loss) => "**LOSS**".into(),
        None => "inconclusive".into(),
    }
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
