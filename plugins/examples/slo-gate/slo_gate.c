// slo-gate: a faultline gate rule in C.
//
// For every cell, one criterion row: each op kind's p99 must be within
// `max_p99_ms` and the cell's error ratio, failed / (ok + failed), within
// `max_error_ratio`. A cell that did not complete, or an op kind with no
// successful op (no latency), is incomplete. See README.md.
//
// Bindings: `wit-bindgen c --world gate` (gate.h, gate.c). Only libc parts
// that do not call into WASI are used (malloc, realloc, calloc, free, memcpy,
// memcmp, strcmp, strlen), so the module imports nothing. Not snprintf or
// strtod: in wasi-libc they reference the stderr FILE, whose write, seek and
// close functions import WASI. Numbers are formatted and parsed by hand.

#include <stdlib.h>
#include <string.h>

#include "gate.h"

typedef exports_faultline_plugin_rule_run_summary_t run_summary_t;
typedef exports_faultline_plugin_rule_cell_summary_t cell_t;
typedef exports_faultline_plugin_rule_op_summary_t op_t;
typedef exports_faultline_plugin_rule_criterion_t criterion_t;
typedef exports_faultline_plugin_rule_verdict_t verdict_t;
typedef exports_faultline_plugin_rule_outcome_t outcome_t;

#define PASS EXPORTS_FAULTLINE_PLUGIN_RULE_OUTCOME_PASS
#define FAIL EXPORTS_FAULTLINE_PLUGIN_RULE_OUTCOME_FAIL
#define INCOMPLETE EXPORTS_FAULTLINE_PLUGIN_RULE_OUTCOME_INCOMPLETE

// ---- config -----------------------------------------------------------------

typedef struct {
    double max_p99_ms;
    double max_error_ratio;
} config_t;

// A tiny parser for a flat JSON object of numbers:
// {"max_p99_ms": 5, "max_error_ratio": 0.01}. Keys may use `-` for `_`.
// Returns NULL on success or a static error message.
typedef struct {
    const char *p, *end;
} scan_t;

static void skip_ws(scan_t *s) {
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

static int eat(scan_t *s, char c) {
    skip_ws(s);
    if (s->p < s->end && *s->p == c) {
        s->p++;
        return 1;
    }
    return 0;
}

// Reads a string without escapes into buf (normalising `-` to `_`).
static int read_key(scan_t *s, char *buf, size_t cap) {
    if (!eat(s, '"')) return 0;
    size_t n = 0;
    while (s->p < s->end && *s->p != '"') {
        if (*s->p == '\\' || n + 1 >= cap) return 0;
        buf[n++] = *s->p == '-' ? '_' : *s->p;
        s->p++;
    }
    if (s->p >= s->end) return 0;
    s->p++;
    buf[n] = 0;
    return 1;
}

static int is_digit(char c) {
    return c >= '0' && c <= '9';
}

// A JSON number: -?digits(.digits)?([eE][+-]?digits)?
static int read_number(scan_t *s, double *out) {
    skip_ws(s);
    double sign = 1, v = 0;
    int digits = 0;
    if (s->p < s->end && *s->p == '-') {
        sign = -1;
        s->p++;
    }
    while (s->p < s->end && is_digit(*s->p)) {
        v = v * 10 + (*s->p++ - '0');
        digits++;
    }
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        double scale = 0.1;
        while (s->p < s->end && is_digit(*s->p)) {
            v += (*s->p++ - '0') * scale;
            scale /= 10;
            digits++;
        }
    }
    if (!digits) return 0;
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        int esign = 1, e = 0, edigits = 0;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-')) esign = *s->p++ == '-' ? -1 : 1;
        while (s->p < s->end && is_digit(*s->p) && e < 400) {
            e = e * 10 + (*s->p++ - '0');
            edigits++;
        }
        if (!edigits) return 0;
        while (e-- > 0) v = esign > 0 ? v * 10 : v / 10;
    }
    *out = sign * v;
    return 1;
}

static const char *parse_config(const gate_string_t *text, config_t *cfg) {
    cfg->max_p99_ms = 5.0;
    cfg->max_error_ratio = 0.001;
    scan_t s = {(const char *)text->ptr, (const char *)text->ptr + text->len};
    skip_ws(&s);
    if (s.p == s.end) return NULL;
    if (s.end - s.p == 4 && memcmp(s.p, "null", 4) == 0) return NULL;
    if (!eat(&s, '{')) return "config must be a JSON map of numbers";
    if (eat(&s, '}')) return NULL;
    do {
        char key[64];
        double v;
        if (!read_key(&s, key, sizeof key)) return "config: expected a key";
        if (!eat(&s, ':')) return "config: expected `:` after a key";
        if (!read_number(&s, &v)) return "config: every value must be a number";
        if (strcmp(key, "max_p99_ms") == 0) {
            if (!(v > 0)) return "config `max_p99_ms` must be above 0";
            cfg->max_p99_ms = v;
        } else if (strcmp(key, "max_error_ratio") == 0) {
            if (!(v >= 0 && v <= 1)) return "config `max_error_ratio` must be in 0..=1";
            cfg->max_error_ratio = v;
        } else {
            return "unknown config key (known: max_p99_ms, max_error_ratio)";
        }
    } while (eat(&s, ','));
    if (!eat(&s, '}')) return "config: expected `,` or `}`";
    skip_ws(&s);
    if (s.p != s.end) return "config: text after the map";
    return NULL;
}

// ---- growing text buffer ------------------------------------------------------

typedef struct {
    char *buf;
    size_t len, cap;
} text_t;

static void text_add(text_t *t, const char *str, size_t n) {
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 128;
        while (t->len + n + 1 > cap) cap *= 2;
        char *grown = realloc(t->buf, cap);
        if (!grown) abort();
        t->buf = grown;
        t->cap = cap;
    }
    memcpy(t->buf + t->len, str, n);
    t->len += n;
}

static void text_str(text_t *t, const char *str) {
    text_add(t, str, strlen(str));
}

static void text_wit(text_t *t, const gate_string_t *s) {
    text_add(t, (const char *)s->ptr, s->len);
}

static void text_u64(text_t *t, uint64_t v) {
    char buf[24];
    size_t i = sizeof buf;
    do {
        buf[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    text_add(t, buf + i, sizeof buf - i);
}

// Fixed point with `decimals` digits after the point, rounded half up;
// trailing zeros dropped when `trim`.
static void text_f64(text_t *t, double v, int decimals, int trim) {
    if (v != v) {
        text_str(t, "NaN");
        return;
    }
    if (v < 0) {
        text_str(t, "-");
        v = -v;
    }
    if (v >= 1e18) {
        text_str(t, "huge");
        return;
    }
    uint64_t scale = 1;
    for (int i = 0; i < decimals; i++) scale *= 10;
    uint64_t fixed = (uint64_t)(v * (double)scale + 0.5);
    text_u64(t, fixed / scale);
    if (decimals == 0) return;
    char frac[20];
    uint64_t f = fixed % scale;
    for (int i = decimals - 1; i >= 0; i--) {
        frac[i] = (char)('0' + f % 10);
        f /= 10;
    }
    int n = decimals;
    if (trim)
        while (n > 0 && frac[n - 1] == '0') n--;
    if (n == 0) return;
    text_str(t, ".");
    text_add(t, frac, (size_t)n);
}

// Hands the text over as a WIT string (owned: freed by the bindings).
static gate_string_t text_take(text_t *t) {
    gate_string_t s = {(uint8_t *)t->buf, t->len};
    t->buf = NULL;
    t->len = t->cap = 0;
    return s;
}

// ---- the rule -----------------------------------------------------------------

static const char *status_name(uint8_t status) {
    switch (status) {
    case EXPORTS_FAULTLINE_PLUGIN_RULE_CELL_STATUS_COMPLETED: return "completed";
    case EXPORTS_FAULTLINE_PLUGIN_RULE_CELL_STATUS_INTERRUPTED: return "interrupted";
    case EXPORTS_FAULTLINE_PLUGIN_RULE_CELL_STATUS_FAILED: return "failed";
    default: return "skipped";
    }
}

static void judge_cell(const cell_t *c, const config_t *cfg, criterion_t *row) {
    text_t name = {0}, ev = {0};
    text_str(&name, "SLO ");
    text_wit(&name, &c->scenario);
    text_str(&name, "/");
    text_wit(&name, &c->profile);
    text_str(&name, "/");
    text_wit(&name, &c->target);
    text_str(&name, "#");
    text_u64(&name, c->repeat);
    outcome_t outcome = PASS;
    if (c->status != EXPORTS_FAULTLINE_PLUGIN_RULE_CELL_STATUS_COMPLETED) {
        text_str(&ev, "cell ");
        text_str(&ev, status_name(c->status));
        text_str(&ev, ": no complete measurement");
        outcome = INCOMPLETE;
    } else if (c->ops.len == 0 || c->ok + c->failed == 0) {
        text_str(&ev, "no op ran");
        outcome = INCOMPLETE;
    } else {
        for (size_t i = 0; i < c->ops.len; i++) {
            const op_t *op = &c->ops.ptr[i];
            if (i) text_str(&ev, ", ");
            text_wit(&ev, &op->kind);
            text_str(&ev, " p99 ");
            if (!op->latency.is_some) {
                text_str(&ev, "none (nothing succeeded)");
                if (outcome == PASS) outcome = INCOMPLETE;
            } else {
                double p99 = op->latency.val.p99_ms;
                text_f64(&ev, p99, 2, 0);
                text_str(&ev, " ms");
                if (p99 > cfg->max_p99_ms) {
                    text_str(&ev, " (over)");
                    outcome = FAIL;
                }
            }
        }
        text_str(&ev, " (bound ");
        text_f64(&ev, cfg->max_p99_ms, 3, 1);
        text_str(&ev, " ms); ");
        double ratio = (double)c->failed / (double)(c->ok + c->failed);
        text_u64(&ev, c->failed);
        text_str(&ev, " of ");
        text_u64(&ev, c->ok + c->failed);
        text_str(&ev, " ops failed (");
        text_f64(&ev, ratio * 100, 3, 1);
        text_str(&ev, "%, bound ");
        text_f64(&ev, cfg->max_error_ratio * 100, 3, 1);
        text_str(&ev, "%)");
        if (ratio > cfg->max_error_ratio) outcome = FAIL;
    }
    row->name = text_take(&name);
    row->evidence = text_take(&ev);
    row->outcome = outcome;
}

bool exports_faultline_plugin_rule_evaluate(gate_string_t *config, run_summary_t *summary, verdict_t *ret,
                                            gate_string_t *err) {
    config_t cfg;
    const char *problem = parse_config(config, &cfg);
    if (problem) {
        gate_string_dup(err, problem);
        gate_string_free(config);
        exports_faultline_plugin_rule_run_summary_free(summary);
        return false;
    }
    size_t n = summary->cells.len;
    size_t rows = n ? n : 1;
    criterion_t *criteria = calloc(rows, sizeof *criteria);
    if (!criteria) abort();
    outcome_t overall = PASS;
    if (n == 0) {
        gate_string_dup(&criteria[0].name, "SLO");
        gate_string_dup(&criteria[0].evidence, "no cell ran");
        criteria[0].outcome = INCOMPLETE;
        overall = INCOMPLETE;
    }
    for (size_t i = 0; i < n; i++) {
        judge_cell(&summary->cells.ptr[i], &cfg, &criteria[i]);
        if (criteria[i].outcome == FAIL) overall = FAIL;
        else if (criteria[i].outcome == INCOMPLETE && overall == PASS) overall = INCOMPLETE;
    }
    ret->outcome = overall;
    ret->criteria.ptr = criteria;
    ret->criteria.len = rows;
    // The arguments are ours to free.
    gate_string_free(config);
    exports_faultline_plugin_rule_run_summary_free(summary);
    return true;
}
