//! The built-in gate language: comparisons of metrics with limits, joined by
//! `and` / `or`, e.g. `p99(get) < 30ms and errors == 0`. The metrics
//! themselves are rows of [`metrics::METRICS`] and of the build's checkers
//! (each checker provides its own, [`CheckerInfo::metrics`]), so parsing
//! takes the checkers.

pub mod metrics;

use std::fmt;

use faultline_model::compare::Measure;
use faultline_model::ops::OpKind;
use faultline_model::stats::Side;
use faultline_model::units::parse_duration;

use crate::checkers::CheckerInfo;

use crate::metric::{Args, GateMetric, MetricRef, Reads, Unit};

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Compare(Operand, CmpOp, Operand),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Every operand, left to right.
    fn operands(&self) -> Vec<&Operand> {
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => [a.operands(), b.operands()].concat(),
            Expr::Compare(l, _, r) => vec![l, r],
        }
    }

    /// Every metric it reads, left to right.
    fn metrics(&self) -> impl Iterator<Item = &MetricRef> {
        self.operands().into_iter().filter_map(|o| match o {
            Operand::Metric(m) => Some(m),
            _ => None,
        })
    }

    /// Whether it compares ratios between variants, which are evaluated per
    /// group of comparable cells rather than per cell.
    pub fn uses_ratios(&self) -> bool {
        self.operands().iter().any(|o| matches!(o, Operand::Ratio(_)))
    }

    /// The (target, baseline) pairs its ratios name.
    pub fn ratio_pairs(&self) -> Vec<(String, String)> {
        self.operands()
            .into_iter()
            .filter_map(|o| match o {
                Operand::Ratio(r) => Some((r.target.clone(), r.baseline.clone())),
                _ => None,
            })
            .collect()
    }

    /// The faults the expression names.
    pub fn faults(&self) -> Vec<String> {
        self.metrics().filter_map(|m| m.fault.clone()).collect()
    }

    /// Whether it takes a latency over a window around a fault, which
    /// needs every success of a fault cell kept.
    pub fn uses_windows(&self) -> bool {
        self.metrics().any(|m| m.window.is_some())
    }

    /// The op kinds its metrics are restricted to (`p99(del)`: `del`).
    pub fn ops(&self) -> Vec<OpKind> {
        self.metrics().filter_map(|m| m.op).collect()
    }

    /// The stages the expression names.
    pub fn stages(&self) -> Vec<String> {
        self.metrics().filter_map(|m| m.stage.clone()).collect()
    }

    /// Whether it reads how much of an open loop's schedule was sent: such a
    /// gate judges an under-sent cell itself.
    pub fn reads_schedule(&self) -> bool {
        self.metrics().any(|m| m.metric.reads == Reads::Schedule)
    }

    /// Whether any metric it reads comes from `what`.
    pub fn reads(&self, what: Reads) -> bool {
        self.metrics().any(|m| m.metric.reads == what)
    }

    /// The latency limits it compares metrics with (`p99(set) < 100ms`:
    /// `("p99(set)", 100.0)`), for drawing them beside what was measured.
    pub fn latency_limits(&self) -> Vec<(String, f64)> {
        let mut out = Vec::new();
        self.each_compare(&mut |l, _, r| {
            if let (Operand::Metric(m), Operand::Number { value, is_duration: true }) = (l, r) {
                out.push((m.to_string(), *value));
            }
        });
        out
    }

    fn each_compare(&self, f: &mut dyn FnMut(&Operand, CmpOp, &Operand)) {
        match self {
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.each_compare(f);
                b.each_compare(f);
            }
            Expr::Compare(l, op, r) => f(l, *op, r),
        }
    }

    /// The checkers whose results the expression reads.
    pub fn checkers(&self) -> Vec<&'static str> {
        self.metrics()
            .filter_map(|m| match m.metric.reads {
                Reads::Checker(c) => Some(c),
                _ => None,
            })
            .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    /// The same comparison with its sides swapped (`a < b` is `b > a`).
    pub fn mirrored(self) -> CmpOp {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
            CmpOp::Eq | CmpOp::Ne => self,
        }
    }

    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }
}

impl fmt::Display for CmpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    /// A literal; durations are held in milliseconds.
    Number {
        value: f64,
        is_duration: bool,
    },
    Metric(MetricRef),
    /// A ratio between two variants, e.g. `ratio(throughput, cand/redis)`.
    Ratio(RatioRef),
}

/// `ratio(MEASURE, TARGET/BASELINE)`, or the low or high end of its 95%
/// bootstrap interval (`ratio_low`, `ratio_high`).
#[derive(Debug, Clone, PartialEq)]
pub struct RatioRef {
    pub measure: Measure,
    pub bound: RatioBound,
    pub target: String,
    pub baseline: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioBound {
    Value,
    Low,
    High,
}

impl RatioBound {
    fn from_name(name: &str) -> Option<RatioBound> {
        match name {
            "ratio" => Some(RatioBound::Value),
            "ratio_low" => Some(RatioBound::Low),
            "ratio_high" => Some(RatioBound::High),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RatioBound::Value => "ratio",
            RatioBound::Low => "ratio_low",
            RatioBound::High => "ratio_high",
        }
    }
}

impl fmt::Display for RatioRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({}, {}/{})", self.bound.name(), self.measure.name(), self.target, self.baseline)
    }
}

/// Status classes other than an HTTP status (see [`faultline_model::stats::status_class`]).
const STATUS_WORDS: [&str; 3] = ["timeout", "network", "error"];

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Number(f64, Option<String>),
    Op(CmpOp),
    LParen,
    RParen,
    Comma,
    Colon,
    Slash,
    And,
    Or,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Ident(s) => write!(f, "`{s}`"),
            Token::Number(n, unit) => write!(f, "`{n}{}`", unit.as_deref().unwrap_or("")),
            Token::Op(op) => write!(f, "`{op}`"),
            Token::LParen => f.write_str("`(`"),
            Token::RParen => f.write_str("`)`"),
            Token::Comma => f.write_str("`,`"),
            Token::Colon => f.write_str("`:`"),
            Token::Slash => f.write_str("`/`"),
            Token::And => f.write_str("`and`"),
            Token::Or => f.write_str("`or`"),
        }
    }
}

fn describe_token(t: Option<&Token>) -> String {
    t.map_or_else(|| "the end of the expression".to_string(), Token::to_string)
}

fn tokenize(src: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if "(),:/".contains(c) {
            out.push(match c {
                '(' => Token::LParen,
                ')' => Token::RParen,
                ',' => Token::Comma,
                '/' => Token::Slash,
                _ => Token::Colon,
            });
            i += 1;
        } else if "<>=!".contains(c) {
            let two = chars.get(i + 1) == Some(&'=');
            let op = match (c, two) {
                ('<', false) => CmpOp::Lt,
                ('<', true) => CmpOp::Le,
                ('>', false) => CmpOp::Gt,
                ('>', true) => CmpOp::Ge,
                ('=', true) => CmpOp::Eq,
                ('!', true) => CmpOp::Ne,
                _ => {
                    return Err(format!(
                        "unexpected `{c}` at character {} of the expression: comparisons are < <= > >= == !=",
                        i + 1
                    ))
                }
            };
            out.push(Token::Op(op));
            i += if two { 2 } else { 1 };
        } else if c.is_ascii_digit() || c == '.' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.' || chars[i] == '_') {
                i += 1;
            }
            let number: String = chars[start..i].iter().filter(|c| **c != '_').collect();
            let value: f64 = number.parse().map_err(|_| format!("`{number}` is not a number"))?;
            let unit_start = i;
            while i < chars.len() && (chars[i].is_alphabetic() || chars[i] == '%') {
                i += 1;
            }
            let unit: String = chars[unit_start..i].iter().collect();
            out.push(Token::Number(value, (!unit.is_empty()).then_some(unit)));
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || matches!(chars[i], '_' | '.' | '-')) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push(match word.as_str() {
                "and" => Token::And,
                "or" => Token::Or,
                _ => Token::Ident(word),
            });
        } else if c == '&' || c == '|' {
            return Err(format!(
                "unexpected `{c}` at character {} of the expression: join comparisons with `and` / `or`",
                i + 1
            ));
        } else {
            return Err(format!("unexpected `{c}` at character {} of the expression", i + 1));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: Vec<Token>,
    pos: usize,
    checkers: &'a [&'static dyn CheckerInfo],
}

/// Parentheses and comparisons a gate may hold: the parser and the tree's
/// walks recurse once per level, so an absurd expression must not reach them.
const MAX_PARENS: usize = 64;
const MAX_COMPARISONS: usize = 256;

/// Parses a gate; `checkers` are the build's, whose metrics it may name.
pub fn parse(src: &str, checkers: &[&'static dyn CheckerInfo]) -> Result<Expr, String> {
    let tokens = tokenize(src)?;
    let mut depth = 0usize;
    for t in &tokens {
        match t {
            Token::LParen => depth += 1,
            Token::RParen => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth > MAX_PARENS {
            return Err(format!("parentheses nested deeper than {MAX_PARENS} levels"));
        }
    }
    if tokens.iter().filter(|t| matches!(t, Token::Op(_))).count() > MAX_COMPARISONS {
        return Err(format!("more than {MAX_COMPARISONS} comparisons in one gate: split it into several gates"));
    }
    let mut p = Parser { tokens, pos: 0, checkers };
    if p.tokens.is_empty() {
        return Err("empty gate: write e.g. `errors == 0` or `p99(get) < 30ms`".into());
    }
    let expr = p.or()?;
    if let Some(t) = p.tokens.get(p.pos) {
        return Err(format!("unexpected {t} after a complete comparison; join comparisons with `and` / `or`"));
    }
    if expr.uses_ratios() && expr.operands().iter().any(|o| matches!(o, Operand::Metric(_))) {
        return Err("a ratio gate compares ratios only (it is judged per group of cells, not per cell): \
             put per-cell conditions such as errors == 0 in a gate of their own"
            .into());
    }
    Ok(expr)
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    /// The condition of its own (`only`) the next token names, if it does.
    fn peek_condition(&self) -> Option<&'static GateMetric> {
        match self.peek() {
            Some(Token::Ident(name)) => GateMetric::named(name, self.checkers).filter(|m| m.unit == Unit::Condition),
            _ => None,
        }
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut left = self.and()?;
        while self.peek() == Some(&Token::Or) {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut left = self.comparison()?;
        while self.peek() == Some(&Token::And) {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.comparison()?));
        }
        Ok(left)
    }

    fn comparison(&mut self) -> Result<Expr, String> {
        // `only(200, 503)`: no call had any other status class.
        if let Some(metric) = self.peek_condition() {
            self.pos += 1;
            let statuses = self.statuses(metric.name)?;
            let outside = MetricRef { metric, op: None, fault: None, window: None, statuses, stage: None };
            return Ok(Expr::Compare(
                Operand::Metric(outside),
                CmpOp::Eq,
                Operand::Number { value: 0.0, is_duration: false },
            ));
        }
        if self.peek() == Some(&Token::LParen) {
            self.pos += 1;
            let inner = self.or()?;
            if self.next() != Some(Token::RParen) {
                return Err("missing `)`".into());
            }
            return Ok(inner);
        }
        let left = self.operand()?;
        let op = match self.next() {
            Some(Token::Op(op)) => op,
            _ => return Err("expected a comparison (< <= > >= == !=) after the first value".into()),
        };
        let right = self.operand()?;
        check_units(&left, &right)?;
        if matches!((&left, &right), (Operand::Number { .. }, Operand::Number { .. })) {
            return Err("compares two numbers; one side must be a metric such as p99(get) or errors".into());
        }
        Ok(Expr::Compare(left, op, right))
    }

    fn operand(&mut self) -> Result<Operand, String> {
        match self.next() {
            Some(Token::Number(value, None)) => Ok(Operand::Number { value, is_duration: false }),
            Some(Token::Number(value, Some(unit))) => {
                if unit == "%" {
                    return Ok(Operand::Number { value: value / 100.0, is_duration: false });
                }
                let d = parse_duration(&format!("{value}{unit}"))?;
                Ok(Operand::Number { value: d.as_secs_f64() * 1e3, is_duration: true })
            }
            Some(Token::Ident(name)) if RatioBound::from_name(&name).is_some() => self.ratio(&name),
            Some(Token::Ident(name)) => {
                let metric = GateMetric::named(&name, self.checkers)
                    .ok_or_else(|| format!("unknown metric `{name}` (known: {})", metrics::known(self.checkers)))?;
                if metric.unit == Unit::Condition {
                    return Err(format!(
                        "`{name}(…)` is a condition of its own, e.g. `{name}(200, 503) and hangs == 0`"
                    ));
                }
                if metric.args == Args::Statuses {
                    let statuses = self.statuses(&name)?;
                    return Ok(Operand::Metric(MetricRef {
                        metric,
                        op: None,
                        fault: None,
                        window: None,
                        statuses,
                        stage: None,
                    }));
                }
                let takes_fault = metric.args == Args::Fault;
                let (mut op, mut fault, mut window, mut stage) = (None, None, None, None);
                if self.peek() == Some(&Token::LParen) {
                    self.pos += 1;
                    let mut arg = match self.next() {
                        Some(Token::Ident(a)) => a,
                        _ if takes_fault => {
                            return Err(format!("`{name}(` must name a fault, e.g. {name}(primary-killed)"))
                        }
                        _ => return Err(format!("`{name}(` must be followed by an op kind, e.g. {name}(get)")),
                    };
                    if takes_fault {
                        fault = Some(arg.clone());
                        // `denied_window(FAULT, OP)`: one op kind's own.
                        if self.peek() == Some(&Token::Comma) {
                            self.pos += 1;
                            op = match self.next() {
                                Some(Token::Ident(o)) => Some(OpKind::from_name(&o).ok_or_else(|| {
                                    format!("`{o}` is not an op kind (known: get, set, incr, del, …): write {name}({arg}, get)")
                                })?),
                                other => {
                                    return Err(format!(
                                        "expected an op kind after `{name}({arg},`, found {}",
                                        describe_token(other.as_ref())
                                    ))
                                }
                            };
                        }
                    } else if metric.args == Args::None {
                        return Err(format!("`{name}` takes no op kind"));
                    } else if metric.args == Args::Stage && self.peek() != Some(&Token::Colon) {
                        return Err(format!("`{name}` takes no op kind: only a stage, e.g. {name}(stage: peak)"));
                    } else if self.peek() != Some(&Token::Colon) {
                        op = Some(
                            OpKind::from_name(&arg)
                                .ok_or_else(|| format!("`{arg}` is not an op kind (known: get, set, incr, del)"))?,
                        );
                        if self.peek() == Some(&Token::Comma) {
                            self.pos += 1;
                            arg = match self.next() {
                                Some(Token::Ident(a)) => a,
                                other => {
                                    return Err(format!(
                                        "expected a window such as `after: FAULT` after `,`, found {}",
                                        describe_token(other.as_ref())
                                    ))
                                }
                            };
                        }
                    }
                    // `stage: NAME`: a stage of an open loop in stages or a closed loop in steps.
                    if self.peek() == Some(&Token::Colon) && arg == "stage" {
                        self.pos += 1;
                        if !matches!(metric.args, Args::OpOrWindow | Args::Stage) {
                            return Err(format!("`{name}` takes no stage: only {} do", metrics::staged()));
                        }
                        match self.next() {
                            Some(Token::Ident(s)) => stage = Some(s),
                            _ => return Err("`stage:` must name a stage, e.g. stage: peak".into()),
                        }
                    }
                    // `before: FAULT`, `during: FAULT` or `after: FAULT`.
                    if self.peek() == Some(&Token::Colon) {
                        self.pos += 1;
                        let side = Side::from_name(&arg).ok_or_else(|| {
                            format!("`{arg}:` is not a window: use before:, during: or after: and a fault's name, or stage: and a stage's")
                        })?;
                        if metric.args != Args::OpOrWindow {
                            return Err(format!("`{name}` takes no window: only {} do", metrics::windowed()));
                        }
                        match self.next() {
                            Some(Token::Ident(f)) => fault = Some(f),
                            _ => return Err(format!("`{arg}:` must name a fault, e.g. {arg}: primary-killed")),
                        }
                        window = Some(side);
                    }
                    if self.next() != Some(Token::RParen) {
                        return Err(format!("missing `)` after `{name}({arg}`"));
                    }
                }
                if takes_fault && fault.is_none() {
                    return Err(format!("`{name}` needs the fault it is about, e.g. {name}(primary-killed)"));
                }
                Ok(Operand::Metric(MetricRef { metric, op, fault, window, statuses: Vec::new(), stage }))
            }
            other => Err(format!("expected a metric or a number, found {}", describe_token(other.as_ref()))),
        }
    }
}

impl Parser<'_> {
    /// After `count` or `only`: `(STATUS, …)`, each an HTTP status (`503`)
    /// or `timeout`, `network`, `error`.
    fn statuses(&mut self, name: &str) -> Result<Vec<String>, String> {
        let form =
            format!("write {name}(STATUS, …) with HTTP statuses or timeout / network / error, e.g. {name}(200, 503)");
        if self.next() != Some(Token::LParen) {
            return Err(format!("`{name}` needs its statuses: {form}"));
        }
        let mut statuses = Vec::new();
        loop {
            match self.next() {
                Some(Token::Number(n, None)) if n.fract() == 0.0 && (100.0..600.0).contains(&n) => {
                    statuses.push(format!("{n}"))
                }
                Some(Token::Ident(w)) if STATUS_WORDS.contains(&w.as_str()) => statuses.push(w),
                // An error type, as the server names it: `ConditionalCheckFailedException`.
                Some(Token::Ident(w)) if w.starts_with(|c: char| c.is_ascii_uppercase()) => statuses.push(w),
                other => return Err(format!("expected a status, found {}: {form}", describe_token(other.as_ref()))),
            }
            match self.next() {
                Some(Token::Comma) => {}
                Some(Token::RParen) => return Ok(statuses),
                other => return Err(format!("expected `,` or `)`, found {}: {form}", describe_token(other.as_ref()))),
            }
        }
    }

    /// After `ratio`, `ratio_low` or `ratio_high`: `(MEASURE, TARGET/BASELINE)`.
    fn ratio(&mut self, name: &str) -> Result<Operand, String> {
        let form = format!("write {name}(throughput, TARGET/BASELINE), e.g. {name}(throughput, candidate/redis)");
        if self.next() != Some(Token::LParen) {
            return Err(format!("`{name}` needs its arguments: {form}"));
        }
        let measure = match self.next() {
            Some(Token::Ident(m)) => Measure::from_name(&m).ok_or_else(|| {
                format!("`{m}` has no ratio: ratios are of throughput, p50, p99, capacity or delivered_rate")
            })?,
            other => {
                return Err(format!(
                    "expected throughput, p50, p99, capacity or delivered_rate, found {}",
                    describe_token(other.as_ref())
                ))
            }
        };
        let mut names = Vec::new();
        for expected in [Token::Comma, Token::Slash] {
            if self.next() != Some(expected) {
                return Err(format!("`{name}(` is malformed: {form}"));
            }
            match self.next() {
                Some(Token::Ident(v)) => names.push(v),
                other => {
                    return Err(format!("expected a variant's name, found {}: {form}", describe_token(other.as_ref())))
                }
            }
        }
        if self.next() != Some(Token::RParen) {
            return Err(format!("missing `)` after `{name}(`: {form}"));
        }
        let bound = RatioBound::from_name(name).expect("checked by the caller");
        let baseline = names.pop().expect("two names");
        let target = names.pop().expect("two names");
        if target == baseline {
            return Err(format!("`{name}` compares `{target}` with itself"));
        }
        Ok(Operand::Ratio(RatioRef { measure, bound, target, baseline }))
    }
}

fn check_units(a: &Operand, b: &Operand) -> Result<(), String> {
    if let (Operand::Ratio(_), Operand::Number { is_duration: true, .. })
    | (Operand::Number { is_duration: true, .. }, Operand::Ratio(_)) = (a, b)
    {
        return Err("a ratio is compared with a duration: compare it with a number, e.g. >= 0.9".into());
    }
    let (metric, number) = match (a, b) {
        (Operand::Metric(m), Operand::Number { is_duration, .. })
        | (Operand::Number { is_duration, .. }, Operand::Metric(m)) => (m, *is_duration),
        _ => return Ok(()),
    };
    match (metric.metric.unit == Unit::Ms, number) {
        (true, false) => Err("a latency is compared with a plain number: give the limit a unit, e.g. 30ms".into()),
        (false, true) => Err("a count or rate is compared with a duration".into()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses against this crate's test checker (the real ones live above).
    fn parse(src: &str) -> Result<Expr, String> {
        super::parse(src, &crate::checkers::testing::CHECKERS)
    }

    #[test]
    fn latency_takes_a_window_around_a_fault() {
        let Expr::Compare(Operand::Metric(m), _, _) = parse("p99(get, after: primary-killed) < 50ms").unwrap() else {
            panic!("a comparison")
        };
        assert_eq!(
            (m.op, m.fault.as_deref(), m.window),
            (Some(OpKind::Get), Some("primary-killed"), Some(Side::After))
        );
        let Expr::Compare(Operand::Metric(m), _, _) = parse("max(before: f) < 1s").unwrap() else { panic!() };
        assert_eq!((m.op, m.fault.as_deref(), m.window), (None, Some("f"), Some(Side::Before)));
        assert_eq!(parse("p99(during: f) < 1s and errors == 0").unwrap().faults(), ["f"]);
        for (bad, why) in [
            ("errors(after: f) == 0", "takes no window"),
            ("p99(get, later: f) < 1s", "is not a window"),
            ("p99(get, after:) < 1s", "must name a fault"),
            ("p99(get, ) < 1s", "expected a window"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn latency_and_the_schedule_take_a_stage() {
        let Expr::Compare(Operand::Metric(m), _, _) = parse("p99(get, stage: peak) < 10ms").unwrap() else {
            panic!("a comparison")
        };
        assert_eq!((m.op, m.stage.as_deref(), m.window), (Some(OpKind::Get), Some("peak"), None));
        assert_eq!(m.to_string(), "p99(get, stage: peak)");
        let e =
            parse("max(stage: ramp-up) < 1s and unsent(stage: peak) == 0 and achieved_rate(stage: s2) > 10").unwrap();
        assert_eq!(e.stages(), ["ramp-up", "peak", "s2"]);
        assert!(e.reads_schedule());
        let Expr::Compare(Operand::Metric(m), _, _) = parse("unsent(stage: peak) == 0").unwrap() else { panic!() };
        assert_eq!(m.to_string(), "unsent(stage: peak)");
        for (bad, why) in [
            ("errors(stage: peak) == 0", "takes no stage"),
            ("unsent(get) == 0", "only a stage"),
            ("p99(get, stage:) < 1s", "must name a stage"),
            ("p99(get, stag: peak) < 1s", "or stage:"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_the_documented_forms() {
        for ok in [
            "denied_window(primary-killed) <= 15s",
            "denied_window(stepped-down, set) <= 5s and first_success(stepped-down, get) < 1s",
            "non_primary_reads == 0",
            "failed_after(kill) < 500",
            "errors == 0",
            "p99(get) < 30ms",
            "throughput >= 50000",
            "hangs == 0",
            "p99.9(set) <= 1.5s and errors == 0 or ops > 10",
            "error_rate < 0.1%",
            "(errors == 0)",
        ] {
            parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        let e = parse("p99(get) < 30ms").unwrap();
        assert_eq!(
            e,
            Expr::Compare(
                Operand::Metric(MetricRef {
                    metric: GateMetric::named("p99", &[]).unwrap(),
                    op: Some(OpKind::Get),
                    fault: None,
                    window: None,
                    statuses: vec![],
                    stage: None,
                }),
                CmpOp::Lt,
                Operand::Number { value: 30.0, is_duration: true }
            )
        );
    }

    #[test]
    fn ratios_name_two_variants() {
        let e = parse("ratio(throughput, cand/redis-7) >= 0.9 and ratio_low(p99, cand/redis-7) < 1.2").unwrap();
        assert!(e.uses_ratios());
        assert_eq!(e.ratio_pairs(), vec![("cand".to_string(), "redis-7".to_string()); 2]);
        let Expr::Compare(Operand::Ratio(r), _, _) = parse("ratio_high(p50, a/b) <= 110%").unwrap() else { panic!() };
        assert_eq!(
            (r.measure, r.bound, r.to_string()),
            (Measure::P50, RatioBound::High, "ratio_high(p50, a/b)".into())
        );
        assert!(!parse("errors == 0").unwrap().uses_ratios());
        for (bad, why) in [
            ("ratio(throughput, a/b) >= 0.9 and errors == 0", "compares ratios only"),
            ("ratio(ops, a/b) >= 0.9", "`ops` has no ratio"),
            ("ratio(throughput, a) >= 0.9", "malformed"),
            ("ratio(throughput, a/) >= 0.9", "expected a variant's name"),
            ("ratio(throughput, a/a) >= 0.9", "with itself"),
            ("ratio >= 0.9", "needs its arguments"),
            ("ratio(p99, a/b) < 2ms", "compared with a duration"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn rejects_mistakes_with_reasons() {
        for (bad, why) in [
            ("p99(get) < 30", "give the limit a unit"),
            ("errors == 5s", "compared with a duration"),
            ("latency < 5ms", "unknown metric"),
            ("p99(fetch) < 5ms", "not an op kind"),
            ("errors = 0", "unexpected `=`"),
            ("denied_window < 5s", "needs the fault"),
            ("errors == 0 && hangs == 0", "join comparisons with `and`"),
            ("errors ==", "found the end of the expression"),
            ("errors == 0 errors", "join comparisons"),
            ("", "empty gate"),
            ("1 < 2", "one side must be a metric"),
            ("p99(get) < 99999999999999999999999h", "too large"),
            (&format!("{}errors == 0{}", "(".repeat(100_000), ")".repeat(100_000)), "nested deeper than 64"),
            (&vec!["errors == 0"; 100_000].join(" and "), "split it into several gates"),
        ] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
