"""error-budget: a faultline gate rule in Python (componentize-py).

For every cell, the share of failed ops, failed / (ok + failed), must stay
within an error budget. One criterion row per cell; see README.md.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.rule import (
    CellStatus,
    Criterion,
    Outcome,
    RunSummary,
    Verdict,
)

KNOWN = {"budget", "ops", "min_ops"}


def _config(text: str) -> dict:
    try:
        config = json.loads(text) if text.strip() else {}
    except ValueError as e:
        raise Err(f"config is not valid JSON: {e}")
    if config is None:
        config = {}
    if not isinstance(config, dict):
        raise Err(f"config must be a map, got {text}")
    config = {k.replace("-", "_"): v for k, v in config.items()}
    unknown = sorted(set(config) - KNOWN)
    if unknown:
        raise Err(f"unknown config key `{unknown[0]}` (known: {', '.join(sorted(KNOWN))})")
    budget = config.get("budget", 0.001)
    if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget <= 1:
        raise Err(f"config `budget` must be a number in 0..=1, got {budget!r}")
    ops = config.get("ops", [])
    if isinstance(ops, str):
        ops = [ops]
    if not isinstance(ops, list) or not all(isinstance(o, str) for o in ops):
        raise Err(f"config `ops` must be a list of op kinds, got {ops!r}")
    min_ops = config.get("min_ops", 1)
    if isinstance(min_ops, bool) or not isinstance(min_ops, int) or min_ops < 1:
        raise Err(f"config `min_ops` must be an integer >= 1, got {min_ops!r}")
    return {"budget": float(budget), "ops": ops, "min_ops": min_ops}


def _label(cell) -> str:
    return f"{cell.scenario}/{cell.profile}/{cell.target}#{cell.repeat}"


def _pct(x: float) -> str:
    return f"{x * 100:.3g}%"


def _row(cell, cfg) -> Criterion:
    name = f"error budget {_label(cell)}"
    if cell.status != CellStatus.COMPLETED:
        return Criterion(name, f"cell {cell.status.name.lower()}: no complete measurement", Outcome.INCOMPLETE)
    if cfg["ops"]:
        picked = [o for o in cell.ops if o.kind in cfg["ops"]]
        ok = sum(o.ok for o in picked)
        failed = sum(o.failed for o in picked)
        what = "/".join(cfg["ops"]) + " ops"
    else:
        ok, failed, what = cell.ok, cell.failed, "ops"
    total = ok + failed
    if total < cfg["min_ops"]:
        return Criterion(name, f"{total} {what} ran, fewer than {cfg['min_ops']}", Outcome.INCOMPLETE)
    ratio = failed / total
    evidence = f"{failed} of {total} {what} failed ({_pct(ratio)}), budget {_pct(cfg['budget'])}"
    return Criterion(name, evidence, Outcome.PASS if ratio <= cfg["budget"] else Outcome.FAIL)


class Rule(exports.Rule):
    def evaluate(self, config: str, summary: RunSummary) -> Verdict:
        cfg = _config(config)
        rows = [_row(c, cfg) for c in summary.cells]
        if not rows:
            rows = [Criterion("error budget", "no cell ran", Outcome.INCOMPLETE)]
        outcomes = {r.outcome for r in rows}
        if Outcome.FAIL in outcomes:
            overall = Outcome.FAIL
        elif Outcome.INCOMPLETE in outcomes:
            overall = Outcome.INCOMPLETE
        else:
            overall = Outcome.PASS
        return Verdict(overall, rows)
