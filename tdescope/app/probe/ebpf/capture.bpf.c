// SPDX-License-Identifier: GPL-2.0
/*
 * tdescope's generic capture probe: one uprobe at a function's first instruction
 * copies the input buffer, one uretprobe copies the output buffer, both into a
 * BPF ring buffer the workbench reads from user space.
 *
 * Nothing here knows an engine. Where the buffers, length, page number and
 * condition live (a register, a stack slot at the first instruction, a constant,
 * or a field of the struct one of those points to)
 * is data: the workbench writes `struct config` into the `config` map after load
 * (tdescope/app/probe/ebpf/program.py mirrors this layout). The program never
 * writes to the target: it reads user memory with bpf_probe_read_user only.
 *
 * Build: clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu
 *        -c capture.bpf.c -o capture.bpf.o   (no kernel headers, no vmlinux.h)
 */
#include <linux/types.h>
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

#define CHUNK 4096          /* bytes of buffer per ring record */
#define MAX_CHUNKS 16       /* so at most 64 KiB per buffer */

enum arg_kind { ARG_NONE = 0, ARG_REG = 1, ARG_STACK = 2, ARG_CONST = 3 };

/* Register numbers: the order of struct pt_regs fields the recipes name. */
enum reg { R_RDI, R_RSI, R_RDX, R_RCX, R_R8, R_R9, R_RAX, R_RBX, R_RBP, R_RSP, R_R10, R_R11,
           R_R12, R_R13, R_R14, R_R15 };

struct argloc {
    __u32 kind;     /* enum arg_kind */
    __u32 reg;      /* enum reg, for ARG_REG */
    __s64 value;    /* the constant, or the offset from rsp for ARG_STACK */
    __s64 adjust;   /* added to what was read (a page starting before the buffer) */
    __s64 field;    /* with width: what was read points to a struct; read its field at this offset */
    __u32 width;    /* 0: no dereference; 2, 4 or 8 bytes */
    __u32 block_id; /* the field is PostgreSQL's BlockIdData (two u16 halves, high first) */
};

struct config {
    struct argloc before, after, length, pgno, cond;
    __s64 cond_value;
    __u32 has_cond;
    __u32 entry_only;
    __u32 max_length;
    __u32 sample_every;         /* 1: every matching call; N: one in N */
    __u64 max_captures;
    __u64 max_bytes_per_s;      /* 0: no byte-rate cap */
};

enum stat {
    S_HITS,          /* entry probe fired */
    S_CONDITION,     /* the condition did not hold (e.g. an encrypt call on a decrypt probe) */
    S_SAMPLED_OUT,   /* skipped by 1-in-N sampling */
    S_RATE_CAPPED,   /* skipped by the byte-rate cap */
    S_OVER_LIMIT,    /* after max_captures */
    S_LOST,          /* records the ring had no room for */
    S_READ_ERRORS,   /* a buffer could not be read */
    S_SEQ,           /* last sequence number given */
    S_MATCHED,       /* calls that passed the condition (for sampling) */
    S_PROG_NS,       /* time spent in this program, both probes */
    S_RETURNS,       /* return probe fired */
    S_RATE_START,    /* start of the current byte-rate second, ns */
    S_RATE_BYTES,    /* bytes copied in it */
    S_NSTATS,
};

enum rec_kind { REC_BEFORE = 0, REC_AFTER = 1 };
#define REC_READ_ERROR 1

struct record {
    __u32 kind;
    __u32 flags;
    __u64 seq;
    __u64 ts_ns;
    __s64 pgno;
    __s64 mode;
    __u64 cost_ns;   /* this probe's time so far, this record's copy included */
    __u32 tid;
    __u32 total;     /* bytes of the whole buffer */
    __u32 offset;    /* of this chunk in it */
    __u32 len;       /* bytes of this chunk */
    __u8 data[CHUNK];
};

struct inflight {
    __u64 seq;
    __u64 out;
    __s64 pgno;
    __s64 mode;
    __u32 len;
    __u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct config);
} config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, S_NSTATS);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 4096);
    __type(key, __u64);          /* pid_tgid: one call in flight per thread */
    __type(value, struct inflight);
} calls SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 1 << 24);  /* resized by the workbench before load */
} events SEC(".maps");

static __always_inline __u64 *stat(__u32 which)
{
    return bpf_map_lookup_elem(&stats, &which);
}

static __always_inline void bump(__u32 which, __u64 by)
{
    __u64 *v = stat(which);
    if (v)
        __sync_fetch_and_add(v, by);
}

/* The registers at the probe, indexed by enum reg. Snapshot once per hit: the
 * verifier accepts only constant offsets into the context. */
struct regs { __u64 r[16]; };

static __always_inline void snapshot(struct pt_regs *ctx, struct regs *g)
{
    g->r[R_RDI] = ctx->rdi; g->r[R_RSI] = ctx->rsi; g->r[R_RDX] = ctx->rdx; g->r[R_RCX] = ctx->rcx;
    g->r[R_R8] = ctx->r8; g->r[R_R9] = ctx->r9; g->r[R_RAX] = ctx->rax; g->r[R_RBX] = ctx->rbx;
    g->r[R_RBP] = ctx->rbp; g->r[R_RSP] = ctx->rsp; g->r[R_R10] = ctx->r10; g->r[R_R11] = ctx->r11;
    g->r[R_R12] = ctx->r12; g->r[R_R13] = ctx->r13; g->r[R_R14] = ctx->r14; g->r[R_R15] = ctx->r15;
}

/* Read an argument at the function's first instruction. Returns 0 when it cannot. */
static __always_inline int arg(const struct regs *g, const struct argloc *loc, __u64 *out)
{
    __u64 v = 0;
    switch (loc->kind) {
    case ARG_REG:
        v = g->r[loc->reg & 15];
        break;
    case ARG_STACK:
        if (bpf_probe_read_user(&v, sizeof(v), (void *)(g->r[R_RSP] + loc->value)))
            return 0;
        break;
    case ARG_CONST:
        v = loc->value;
        break;
    default:
        return 0;
    }
    if (loc->width) {
        __u64 p = v + loc->field;
        v = 0;
        if (loc->width == 2) {
            __u16 w = 0;
            if (bpf_probe_read_user(&w, sizeof(w), (void *)p))
                return 0;
            v = w;
        } else if (loc->width == 4) {
            __u32 w = 0;
            if (bpf_probe_read_user(&w, sizeof(w), (void *)p))
                return 0;
            v = loc->block_id ? ((w & 0xffff) << 16) | (w >> 16) : w;
        } else {
            if (bpf_probe_read_user(&v, sizeof(v), (void *)p))
                return 0;
        }
    }
    *out = v + loc->adjust;
    return 1;
}

/* The byte-rate cap: a one-second window shared by all CPUs (approximate, on purpose). */
static __always_inline int rate_allows(const struct config *cfg, __u64 now, __u64 bytes)
{
    if (!cfg->max_bytes_per_s)
        return 1;
    __u64 *start = stat(S_RATE_START), *used = stat(S_RATE_BYTES);
    if (!start || !used)
        return 0;
    if (now - *start > 1000000000ULL) {
        *start = now;
        *used = 0;
    }
    if (*used + bytes > cfg->max_bytes_per_s)
        return 0;
    __sync_fetch_and_add(used, bytes);
    return 1;
}

/* Copy `total` bytes at `src` into the ring as CHUNK-sized records. */
static __always_inline void emit(__u32 kind, __u64 seq, __s64 pgno, __s64 mode, __u64 src, __u32 total,
                                 __u64 t0)
{
    __u64 ts = bpf_ktime_get_ns();
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    for (int i = 0; i < MAX_CHUNKS; i++) {
        __u32 off = (__u32)i * CHUNK;
        if (i > 0 && off >= total)
            break;
        struct record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
        if (!r) {
            bump(S_LOST, 1);
            return;
        }
        __u32 n = total > off ? total - off : 0;
        if (n > CHUNK)
            n = CHUNK;
        r->kind = kind;
        r->flags = 0;
        r->seq = seq;
        r->ts_ns = ts;
        r->pgno = pgno;
        r->mode = mode;
        r->tid = tid;
        r->total = total;
        r->offset = off;
        r->len = n;
        if (n && bpf_probe_read_user(r->data, n, (void *)(src + off))) {
            r->flags = REC_READ_ERROR;
            r->len = 0;
            bump(S_READ_ERRORS, 1);
        }
        r->cost_ns = bpf_ktime_get_ns() - t0;
        /* no wake-up per record: the workbench polls the ring on a short timer */
        bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
    }
}

SEC("uprobe")
int on_entry(struct pt_regs *ctx)
{
    __u64 t0 = bpf_ktime_get_ns();
    __u32 zero = 0;
    struct config *cfg = bpf_map_lookup_elem(&config, &zero);
    if (!cfg)
        return 0;
    bump(S_HITS, 1);
    struct regs g;
    snapshot(ctx, &g);
    __s64 mode = -1;
    __u64 v = 0;
    if (cfg->has_cond) {
        if (!arg(&g, &cfg->cond, &v))
            goto out;
        mode = (__s32)v;  /* a C int argument: the register's upper half is undefined */
        if ((__s32)v != (__s32)cfg->cond_value) {
            bump(S_CONDITION, 1);
            goto out;
        }
    }
    if (cfg->sample_every > 1) {
        __u64 *m = stat(S_MATCHED);
        if (!m)
            goto out;
        __u64 n = __sync_fetch_and_add(m, 1);
        if (n % cfg->sample_every) {
            bump(S_SAMPLED_OUT, 1);
            goto out;
        }
    }
    __u64 len = 0, src = 0, pg = 0;
    if (!arg(&g, &cfg->length, &len) || !arg(&g, &cfg->before, &src))
        goto out;
    if (len > cfg->max_length)
        len = cfg->max_length;
    if (len > CHUNK * MAX_CHUNKS)
        len = CHUNK * MAX_CHUNKS;
    __s64 pgno = -1;
    if (cfg->pgno.kind != ARG_NONE && arg(&g, &cfg->pgno, &pg))
        pgno = (__s32)pg;
    if (!rate_allows(cfg, t0, cfg->entry_only ? len : 2 * len)) {
        bump(S_RATE_CAPPED, 1);
        goto out;
    }
    __u64 *seqp = stat(S_SEQ);
    if (!seqp)
        goto out;
    __u64 seq = __sync_fetch_and_add(seqp, 1) + 1;
    if (seq > cfg->max_captures) {
        bump(S_OVER_LIMIT, 1);
        goto out;
    }
    emit(REC_BEFORE, seq, pgno, mode, src, (__u32)len, t0);
    if (!cfg->entry_only) {
        struct inflight call = {.seq = seq, .pgno = pgno, .mode = mode, .len = (__u32)len};
        if (arg(&g, &cfg->after, &call.out)) {
            __u64 id = bpf_get_current_pid_tgid();
            bpf_map_update_elem(&calls, &id, &call, BPF_ANY);
        }
    }
out:
    bump(S_PROG_NS, bpf_ktime_get_ns() - t0);
    return 0;
}

SEC("uretprobe")
int on_return(struct pt_regs *ctx)
{
    __u64 t0 = bpf_ktime_get_ns();
    __u64 id = bpf_get_current_pid_tgid();
    bump(S_RETURNS, 1);
    struct inflight *call = bpf_map_lookup_elem(&calls, &id);
    if (call) {
        struct inflight c = *call;
        bpf_map_delete_elem(&calls, &id);
        emit(REC_AFTER, c.seq, c.pgno, c.mode, c.out, c.len, t0);
    }
    bump(S_PROG_NS, bpf_ktime_get_ns() - t0);
    return 0;
}
