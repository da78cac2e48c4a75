/* C source for a fused region (see tn/graph.h).
 *
 * The region's shape splits into rows (every dimension but the last) and the last dimension.
 * Each thread takes a range of rows (or, with few rows, a range of the last dimension); a row
 * finds its operands' offsets once, then one loop over the last dimension loads every input,
 * evaluates the nodes in float32 and stores every output. Sizes and strides are constants in
 * the source, so contiguous rows vectorize.
 *
 * Row sums: a node's level is the number of row sums on its longest path from the inputs. A
 * region whose deepest level is L makes L + 1 passes over each row (threads then take whole
 * rows): pass p evaluates the nodes of levels up to p and adds up the row sums of level p + 1
 * (sixteen partial sums, so the loop vectorizes without reassociating); the last pass stores
 * the outputs. Earlier nodes are computed again in later passes rather than stored: a row is
 * small and stays in cache, and the C compiler drops what a pass does not use. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

/* A growing string; `failed` sticks once an allocation fails. */
typedef struct text {
    char *s;
    size_t len, cap;
    int failed;
} text;

static void put(text *t, const char *fmt, ...) {
    if (t->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s ? t->s + t->len : NULL, t->s ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = 1;
            return;
        }
        if (t->s && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = (t->cap + (size_t)n + 1) * 2;
        char *s = realloc(t->s, cap);
        if (!s) {
            t->failed = 1;
            return;
        }
        t->s = s;
        t->cap = cap;
    }
}

/* The kernels' float math (tn_expf, tn_sigmoidf, tn_tanhf, tn_gelu_tanhf) and bf16/f16
 * conversions, as text (the Makefile makes it from half.h and math_f32.h): a fused region
 * rounds like the eager kernels and its loops vectorize like theirs. */
static const char *const kernel_math[] = {
#include "kernel_math.inc"
};

static const char *helpers =
    "#define ld_bf16 tn_bf16_to_f32_inline\n"
    "#define st_bf16 tn_f32_to_bf16_inline\n"
    "#define ld_f16 tn_f16_to_f32_inline\n"
    "#define st_f16 tn_f32_to_f16_inline\n"
    "static inline float max_nan(float a, float b) { return a != a ? a : b != b ? b : a > b ? a : b; }\n"
    "static inline float min_nan(float a, float b) { return a != a ? a : b != b ? b : a < b ? a : b; }\n";

static const char *c_type(tn_dtype t) {
    switch (t) {
    case TN_DTYPE_F32: return "float";
    case TN_DTYPE_BF16: case TN_DTYPE_F16: return "uint16_t";
    case TN_DTYPE_BOOL: return "uint8_t";
    default: return NULL;
    }
}

static void load(text *t, tn_dtype d, const char *expr) {
    switch (d) {
    case TN_DTYPE_BF16: put(t, "ld_bf16(%s)", expr); break;
    case TN_DTYPE_F16: put(t, "ld_f16(%s)", expr); break;
    case TN_DTYPE_BOOL: put(t, "(float)(%s != 0)", expr); break;
    default: put(t, "%s", expr);
    }
}

static void literal(text *t, double v) {
    float f = (float)v;
    if (f != f) put(t, "NAN");
    else if (isinf(f)) put(t, f > 0 ? "INFINITY" : "(-INFINITY)");
    else put(t, "%af", (double)f);
}

static int arity(tn_graph_op op) {
    if (op == TN_GRAPH_INPUT || op == TN_GRAPH_CONST) return 0;
    if (op < TN_GRAPH_ADD || op == TN_GRAPH_ROW_SUM) return 1;
    return op == TN_GRAPH_WHERE ? 3 : 2;
}

/* The expression of node i (its arguments are t<arg>). */
static void expression(text *t, const tn_graph *g, int32_t i) {
    const tn_graph_node *n = &g->nodes[i];
    int32_t a = n->arg[0], b = n->arg[1], c = n->arg[2];
    switch (n->op) {
    case TN_GRAPH_INPUT: put(t, "x%d", (int)a); break;
    case TN_GRAPH_CONST: literal(t, n->value); break;
    case TN_GRAPH_NEG: put(t, "-t%d", (int)a); break;
    case TN_GRAPH_ABS: put(t, "fabsf(t%d)", (int)a); break;
    case TN_GRAPH_EXP: put(t, "tn_expf(t%d)", (int)a); break;
    case TN_GRAPH_LOG: put(t, "logf(t%d)", (int)a); break;
    case TN_GRAPH_SQRT: put(t, "sqrtf(t%d)", (int)a); break;
    case TN_GRAPH_RSQRT: put(t, "1.0f / sqrtf(t%d)", (int)a); break;
    case TN_GRAPH_RECIPROCAL: put(t, "1.0f / t%d", (int)a); break;
    case TN_GRAPH_SIGMOID: put(t, "tn_sigmoidf(t%d)", (int)a); break;
    case TN_GRAPH_SILU: put(t, "t%d / (1.0f + tn_expf(-t%d))", (int)a, (int)a); break;
    case TN_GRAPH_TANH: put(t, "tn_tanhf(t%d)", (int)a); break;
    case TN_GRAPH_RELU: put(t, "(t%d > 0.0f || t%d != t%d) ? t%d : 0.0f", (int)a, (int)a, (int)a, (int)a); break;
    case TN_GRAPH_GELU: put(t, "0.5f * t%d * (1.0f + erff(t%d * 0x1.6a09e6p-1f))", (int)a, (int)a); break;
    case TN_GRAPH_GELU_TANH: put(t, "tn_gelu_tanhf(t%d)", (int)a); break;
    case TN_GRAPH_SIN: put(t, "sinf(t%d)", (int)a); break;
    case TN_GRAPH_COS: put(t, "cosf(t%d)", (int)a); break;
    case TN_GRAPH_ROUND:
        put(t, n->dtype == TN_DTYPE_BF16 ? "ld_bf16(st_bf16(t%d))" : "ld_f16(st_f16(t%d))", (int)a);
        break;
    case TN_GRAPH_ADD: put(t, "t%d + t%d", (int)a, (int)b); break;
    case TN_GRAPH_SUB: put(t, "t%d - t%d", (int)a, (int)b); break;
    case TN_GRAPH_MUL: put(t, "t%d * t%d", (int)a, (int)b); break;
    case TN_GRAPH_DIV: put(t, "t%d / t%d", (int)a, (int)b); break;
    case TN_GRAPH_MAX: put(t, "max_nan(t%d, t%d)", (int)a, (int)b); break;
    case TN_GRAPH_MIN: put(t, "min_nan(t%d, t%d)", (int)a, (int)b); break;
    case TN_GRAPH_POW: {
        const tn_graph_node *e = &g->nodes[b];
        if (e->op == TN_GRAPH_CONST && e->value == 2.0) put(t, "t%d * t%d", (int)a, (int)a);
        else if (e->op == TN_GRAPH_CONST && e->value == 0.5) put(t, "sqrtf(t%d)", (int)a);
        else if (e->op == TN_GRAPH_CONST && e->value == -1.0) put(t, "1.0f / t%d", (int)a);
        else if (e->op == TN_GRAPH_CONST && e->value == 1.0) put(t, "t%d", (int)a);
        else put(t, "powf(t%d, t%d)", (int)a, (int)b);
        break;
    }
    case TN_GRAPH_WHERE: put(t, "t%d != 0.0f ? t%d : t%d", (int)a, (int)b, (int)c); break;
    case TN_GRAPH_ROW_SUM: put(t, "s%d", (int)i); break; /* summed by an earlier pass */
    default: put(t, "0.0f");
    }
}

tn_status tn_graph_validate(const tn_graph *g) {
    if (g->ndim < 1 || g->ndim > TN_MAX_DIMS)
        return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: rank %d is not in 1..%d",
                        (int)g->ndim, TN_MAX_DIMS);
    for (int32_t d = 0; d < g->ndim; d++)
        if (g->sizes[d] < 0) return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: negative size");
    if (g->noutputs < 1) return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region without outputs");
    for (int32_t i = 0; i < g->ninputs; i++)
        if (!c_type(g->inputs[i].dtype))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: input %d has dtype %s; "
                            "float32, bfloat16, float16 or bool only", (int)i,
                            tn_dtype_name(g->inputs[i].dtype));
    for (int32_t i = 0; i < g->nnodes; i++) {
        const tn_graph_node *n = &g->nodes[i];
        if (n->op < 0 || n->op >= TN_GRAPH_OP_COUNT_)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: node %d has an unknown op", (int)i);
        if (n->op == TN_GRAPH_INPUT && (n->arg[0] < 0 || n->arg[0] >= g->ninputs))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: node %d reads input %d of %d",
                            (int)i, (int)n->arg[0], (int)g->ninputs);
        for (int k = 0; k < arity(n->op); k++)
            if (n->arg[k] < 0 || n->arg[k] >= i)
                return tn_error(TN_STATUS_INVALID_ARGUMENT,
                                "fused region: node %d reads node %d, which does not come before it",
                                (int)i, (int)n->arg[k]);
        if (n->op == TN_GRAPH_ROW_SUM && !isfinite(n->value))
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: node %d sums with scale %g",
                            (int)i, n->value);
        if (n->op == TN_GRAPH_ROUND && n->dtype != TN_DTYPE_BF16 && n->dtype != TN_DTYPE_F16)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: node %d rounds to %s", (int)i,
                            tn_dtype_name(n->dtype));
    }
    for (int32_t o = 0; o < g->noutputs; o++) {
        const tn_graph_operand *out = &g->outputs[o];
        if (out->node < 0 || out->node >= g->nnodes)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: output %d stores node %d of %d",
                            (int)o, (int)out->node, (int)g->nnodes);
        if (!c_type(out->dtype) || out->dtype == TN_DTYPE_BOOL)
            return tn_error(TN_STATUS_INVALID_ARGUMENT, "fused region: output %d has dtype %s",
                            (int)o, tn_dtype_name(out->dtype));
    }
    return TN_STATUS_OK;
}

/* Offsets of operand k: "o<k>" for a row, stepping by its last stride along the row. */
static void row_offsets(text *t, const tn_graph *g, const char *prefix, const tn_graph_operand *ops,
                        int32_t count) {
    for (int32_t k = 0; k < count; k++) {
        put(t, "        int64_t %s%d = 0", prefix, (int)k);
        for (int32_t d = 0; d < g->ndim - 1; d++)
            if (ops[k].strides[d]) put(t, " + i%d * INT64_C(%lld)", (int)d, (long long)ops[k].strides[d]);
        put(t, ";\n");
    }
}

/* Levels (see the top of the file); returns the deepest. */
static int32_t levels(const tn_graph *g, int32_t *level) {
    int32_t deepest = 0;
    for (int32_t i = 0; i < g->nnodes; i++) {
        const tn_graph_node *n = &g->nodes[i];
        level[i] = 0;
        for (int k = 0; k < arity(n->op); k++)
            if (level[n->arg[k]] > level[i]) level[i] = level[n->arg[k]];
        if (n->op == TN_GRAPH_ROW_SUM) level[i]++;
        if (level[i] > deepest) deepest = level[i];
    }
    return deepest;
}

/* One position `e` of a row in pass `pass`: loads the inputs and evaluates the nodes of levels
 * up to `pass`. */
static void body(text *t, const tn_graph *g, const int32_t *level, int32_t pass, const char *indent) {
    for (int32_t k = 0; k < g->ninputs; k++) {
        char at[96];
        snprintf(at, sizeof at, "in%d[a%d + e * INT64_C(%lld)]", (int)k, (int)k,
                 (long long)g->inputs[k].strides[g->ndim - 1]);
        put(t, "%sconst float x%d = ", indent, (int)k);
        load(t, g->inputs[k].dtype, at);
        put(t, ";\n");
    }
    for (int32_t i = 0; i < g->nnodes; i++) {
        if (level[i] > pass) continue;
        put(t, "%sconst float t%d = ", indent, (int)i);
        expression(t, g, i);
        put(t, ";\n");
    }
}

/* Pass `pass` of a region with row sums: the sums of level pass + 1, in sixteen lanes. */
static void sum_pass(text *t, const tn_graph *g, const int32_t *level, int32_t pass) {
    put(t, "        {\n");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM && level[i] == pass + 1)
            put(t, "            float p%d[16] = {0}, q%d = 0.0f;\n", (int)i, (int)i);
    put(t, "            int64_t e16 = e0;\n"
           "            for (; e16 + 16 <= e1; e16 += 16)\n"
           "                for (int l = 0; l < 16; l++) {\n"
           "                    const int64_t e = e16 + l;\n");
    body(t, g, level, pass, "                    ");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM && level[i] == pass + 1)
            put(t, "                    p%d[l] += t%d;\n", (int)i, (int)g->nodes[i].arg[0]);
    put(t, "                }\n"
           "            for (int64_t e = e16; e < e1; e++) {\n");
    body(t, g, level, pass, "                ");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM && level[i] == pass + 1)
            put(t, "                q%d += t%d;\n", (int)i, (int)g->nodes[i].arg[0]);
    put(t, "            }\n");
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM && level[i] == pass + 1) {
            put(t, "            for (int l = 0; l < 16; l++) q%d += p%d[l];\n", (int)i, (int)i);
            put(t, "            s%d = q%d * ", (int)i, (int)i);
            literal(t, g->nodes[i].value);
            put(t, ";\n");
        }
    put(t, "        }\n");
}

tn_status tn_graph_codegen(const tn_graph *region, char **source) {
    *source = NULL;
    tn_status st = tn_graph_validate(region);
    if (st != TN_STATUS_OK) return st;
    tn_graph ordered;
    tn_graph_operand *operands;
    st = tn_graph_loop_order(region, &ordered, &operands);
    if (st != TN_STATUS_OK) return st;
    const tn_graph *g = &ordered;
    int32_t *level = malloc(sizeof(int32_t) * (size_t)(g->nnodes > 0 ? g->nnodes : 1));
    if (!level) {
        free(operands);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for generated code");
    }
    int32_t deepest = levels(g, level);
    int64_t rows = 1, inner = g->sizes[g->ndim - 1];
    for (int32_t d = 0; d < g->ndim - 1; d++) rows *= g->sizes[d];
    /* whole rows per thread when rows are many, the row is short, or rows are summed */
    int split_rows = rows >= 64 || inner < 1024 || deepest > 0;
    for (int32_t k = 0; k < g->noutputs; k++) /* a per-row output is written by its row's thread */
        if (g->outputs[k].strides[g->ndim - 1] == 0) split_rows = 1;
    text t = {0};
    put(&t, "/* generated by torch_neuronx: a fused region of %d nodes */\n#include <string.h>\n",
        (int)g->nnodes);
    for (size_t i = 0; i < sizeof kernel_math / sizeof kernel_math[0]; i++) put(&t, "%s", kernel_math[i]);
    put(&t, "%s", helpers);
    put(&t, "void tn_fused(int32_t ith, int32_t nth, void *const *ptr) {\n");
    for (int32_t k = 0; k < g->ninputs; k++)
        put(&t, "    const %s *in%d = (const %s *)ptr[%d];\n", c_type(g->inputs[k].dtype), (int)k,
            c_type(g->inputs[k].dtype), (int)k);
    for (int32_t k = 0; k < g->noutputs; k++)
        put(&t, "    %s *out%d = (%s *)ptr[%d];\n", c_type(g->outputs[k].dtype), (int)k,
            c_type(g->outputs[k].dtype), (int)(g->ninputs + k));
    put(&t, "    const int64_t rows = INT64_C(%lld), inner = INT64_C(%lld);\n", (long long)rows,
        (long long)inner);
    put(&t, "    int64_t n = %s, per = (n + nth - 1) / nth;\n", split_rows ? "rows" : "inner");
    put(&t, "    int64_t lo = per * ith < n ? per * ith : n, hi = lo + per < n ? lo + per : n;\n");
    if (split_rows)
        put(&t, "    for (int64_t r = lo; r < hi; r++) {\n        const int64_t e0 = 0, e1 = inner;\n");
    else
        put(&t, "    for (int64_t r = 0; r < rows; r++) {\n        const int64_t e0 = lo, e1 = hi;\n");
    put(&t, "        int64_t q = r;\n");
    for (int32_t d = g->ndim - 2; d >= 0; d--)
        put(&t, "        int64_t i%d = q %% INT64_C(%lld); q /= INT64_C(%lld);\n", (int)d,
            (long long)g->sizes[d], (long long)g->sizes[d]);
    put(&t, "        (void)q;\n");
    row_offsets(&t, g, "a", g->inputs, g->ninputs);
    row_offsets(&t, g, "b", g->outputs, g->noutputs);
    for (int32_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].op == TN_GRAPH_ROW_SUM) put(&t, "        float s%d;\n", (int)i);
    for (int32_t pass = 0; pass < deepest; pass++) sum_pass(&t, g, level, pass);
    put(&t, "        for (int64_t e = e0; e < e1; e++) {\n");
    body(&t, g, level, deepest, "            ");
    for (int32_t k = 0; k < g->noutputs; k++) {
        const tn_graph_operand *o = &g->outputs[k];
        const char *store = o->dtype == TN_DTYPE_BF16 ? "st_bf16" : o->dtype == TN_DTYPE_F16 ? "st_f16" : "";
        put(&t, "            out%d[b%d + e * INT64_C(%lld)] = %s(t%d);\n", (int)k, (int)k,
            (long long)o->strides[g->ndim - 1], store, (int)o->node);
    }
    put(&t, "        }\n    }\n}\n");
    free(level);
    free(operands);
    if (t.failed) {
        free(t.s);
        return tn_error(TN_STATUS_OUT_OF_MEMORY, "no host memory for generated code");
    }
    *source = t.s;
    return TN_STATUS_OK;
}
