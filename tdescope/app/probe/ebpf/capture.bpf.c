// SPDX-License-Identifier: GPL-2.0
/*
 * tdescope's generic capture probe: one uprobe at a function's first instruction
 * copies the input buffer, one uretprobe copies the output buffer, both into a
 * BPF ring buffer the workbench reads from user space.
 *
 * Nothing here knows an engine. Where the buffers, length, page number, context and
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

/* One ring record per buffer. bpf_ringbuf_reserve needs a constant size, so a buffer takes the
 * smallest of these classes that holds it (a 16 KiB page: one 16 KiB record, not four 4 KiB ones). */
#define MAX_BUFFER 65536

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
    struct argloc before, after, length, pgno, cond, context;
    __s64 cond_value;
    __u32 has_cond;
    __u32 entry_only;
    __u32 max_length;
    __u32 sample_every;         /* 1: every matching call; N: one in N */
    __u64 max_captures;
    __u64 max_bytes_per_s;      /* 0: no byte-rate cap */
};

/* Per-CPU counters (no atomics, no cache line bouncing between the target's threads). Every
 * entry hit ends in exactly one of CONDITION, SAMPLED_OUT, RATE_CAPPED, OVER_LIMIT, LOST, EMITTED:
 * HITS = the sum of those six (the workbench checks and prints the identity). */
enum stat {
    S_HITS,          /* entry probe fired */
    S_CONDITION,     /* the condition did not hold (e.g. an encrypt call on a decrypt probe) */
    S_SAMPLED_OUT,   /* skipped by 1-in-N sampling */
    S_RATE_CAPPED,   /* skipped by the byte-rate cap */
    S_OVER_LIMIT,    /* after max_captures */
    S_LOST,          /* the ring had no room for the entry record, or an argument could not be read */
    S_READ_ERRORS,   /* a buffer could not be read (its record goes out empty, flagged) */
    S_EMITTED,       /* the entry record went into the ring */
    S_LOST_RETURN,   /* emitted, but the ring had no room for the return record */
    S_PROG_NS,       /* time spent in this program, both probes */
    S_RETURNS,       /* return probe fired */
    S_NSTATS,
};

/* Shared by all CPUs: the sequence, the sampling count, the byte-rate second, the pages put in the
 * ring, and the ring bytes promised to the return records of calls in flight (see room_for). */
enum shared { G_SEQ, G_MATCHED, G_RATE_START, G_RATE_BYTES, G_IN_RING, G_PROMISED, G_NSHARED };

enum rec_kind { REC_BEFORE = 0, REC_AFTER = 1 };
#define REC_READ_ERROR 1

struct record {
    __u32 kind;
    __u32 flags;
    __u64 seq;
    __u64 ts_ns;
    __s64 pgno;
    __s64 context;   /* what the call belongs to (a relation's OID or file node, a cipher's block counter); -1: none */
    __u64 cost_ns;   /* this probe's time so far, this record's copy included */
    __u32 tid;
    __u32 len;       /* bytes of buffer that follow */
    __u8 data[];
};

struct inflight {
    __u64 seq;
    __u64 out;
    __s64 pgno;
    __s64 context;
    __u32 len;
    __u32 promised;  /* ring bytes kept for this call's return record (given back when it is written) */
};

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct config);
} config SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, S_NSTATS);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, G_NSHARED);
    __type(key, __u32);
    __type(value, __u64);
} shared SEC(".maps");

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

static __always_inline __u64 *global(__u32 which)
{
    return bpf_map_lookup_elem(&shared, &which);
}

/* This CPU's counter: the program runs with migration disabled, a plain add is enough. */
static __always_inline void bump(__u32 which, __u64 by)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &which);
    if (v)
        *v += by;
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
    __u64 *start = global(G_RATE_START), *used = global(G_RATE_BYTES);
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

/* One record of a buffer class: header plus SZ bytes reserved, `total` (<= SZ) copied. Returns 0
 * when the ring had no room. SZ is a constant after inlining, as bpf_ringbuf_reserve requires. */
static __always_inline int emit_sz(const __u32 SZ, __u32 kind, __u64 seq, __s64 pgno, __s64 context, __u64 src,
                                   __u32 total, __u64 t0)
{
    struct record *r = bpf_ringbuf_reserve(&events, sizeof(*r) + SZ, 0);
    if (!r)
        return 0;
    __u64 n = total;  /* 64-bit: the verifier links the compare below to the register the copy uses */
    asm volatile("" : "+r"(n));  /* keep the clamp: the caller's class test proves it, the verifier needs it */
    if (n > SZ)
        n = SZ;
    r->kind = kind;
    r->flags = 0;
    r->seq = seq;
    r->ts_ns = t0;
    r->pgno = pgno;
    r->context = context;
    r->tid = (__u32)bpf_get_current_pid_tgid();
    r->len = (__u32)n;
    if (n && bpf_probe_read_user(r->data, n, (void *)src)) {
        r->flags = REC_READ_ERROR;
        r->len = 0;
        bump(S_READ_ERRORS, 1);
    }
    r->cost_ns = bpf_ktime_get_ns() - t0;
    /* no wake-up per record: the workbench polls the ring on a short timer */
    bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
    return 1;
}

/* The ring bytes one record of `total` buffer bytes takes: the ring's 8-byte header, the record,
 * the buffer's class (what emit reserves), rounded up to 8. */
static __always_inline __u64 ring_bytes_of(__u32 total)
{
    __u64 cls = total <= 1024 ? 1024 : total <= 4096 ? 4096 : total <= 8192 ? 8192 : total <= 16384 ? 16384
              : total <= 32768 ? 32768 : MAX_BUFFER;
    return (8 + sizeof(struct record) + cls + 7) & ~7ULL;
}

/* Room for an entry record now and its return record later. A call's entry goes into the ring only
 * when the ring also holds room for the return records of every call still in flight, this one's
 * included: an entry whose return record then finds the ring full would never pair, and the workbench,
 * which hands pages over in call order, would hold every later page back behind it. On success the
 * return's bytes stay promised (G_PROMISED) until on_return has written its record. */
static __always_inline int room_for(__u64 entry_bytes, __u64 return_bytes)
{
    __u64 *promised = global(G_PROMISED);
    if (!promised)
        return 0;
    __u64 owed = __sync_fetch_and_add(promised, return_bytes) + return_bytes;
    __u64 used = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
    if (used + owed + entry_bytes <= bpf_ringbuf_query(&events, BPF_RB_RING_SIZE))
        return 1;
    __sync_fetch_and_add(promised, -return_bytes);
    return 0;
}

static __always_inline void give_back(__u64 bytes)
{
    __u64 *promised = global(G_PROMISED);
    if (promised && bytes)
        __sync_fetch_and_add(promised, -bytes);
}

/* Copy `total` bytes at `src` into the ring as one record of the smallest class that holds them. */
static __always_inline int emit(__u32 kind, __u64 seq, __s64 pgno, __s64 context, __u64 src, __u32 total, __u64 t0)
{
    if (total <= 1024)
        return emit_sz(1024, kind, seq, pgno, context, src, total, t0);
    if (total <= 4096)
        return emit_sz(4096, kind, seq, pgno, context, src, total, t0);
    if (total <= 8192)
        return emit_sz(8192, kind, seq, pgno, context, src, total, t0);
    if (total <= 16384)
        return emit_sz(16384, kind, seq, pgno, context, src, total, t0);
    if (total <= 32768)
        return emit_sz(32768, kind, seq, pgno, context, src, total, t0);
    return emit_sz(MAX_BUFFER, kind, seq, pgno, context, src, total, t0);
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
    __u64 v = 0;
    __u32 outcome = S_LOST;  /* where this hit is counted: exactly one outcome per hit */
    if (cfg->has_cond) {
        if (!arg(&g, &cfg->cond, &v))
            goto out;
        if ((__s32)v != (__s32)cfg->cond_value) {  /* a C int argument: the upper half is undefined */
            outcome = S_CONDITION;
            goto out;
        }
    }
    if (cfg->sample_every > 1) {
        __u64 *m = global(G_MATCHED);
        if (!m)
            goto out;
        __u64 n = __sync_fetch_and_add(m, 1);
        if (n % cfg->sample_every) {
            outcome = S_SAMPLED_OUT;
            goto out;
        }
    }
    __u64 len = 0, src = 0, pg = 0;
    if (!arg(&g, &cfg->length, &len) || !arg(&g, &cfg->before, &src))
        goto out;
    len = (__u32)len;  /* lengths are C (unsigned) ints or small size_ts: a 32-bit register's upper half is undefined */
    if (len > cfg->max_length)
        len = cfg->max_length;
    if (len > MAX_BUFFER)
        len = MAX_BUFFER;
    __s64 pgno = -1;
    if (cfg->pgno.kind != ARG_NONE && arg(&g, &cfg->pgno, &pg))
        pgno = (__s32)pg;
    __s64 context = -1;
    __u64 cx = 0;
    if (cfg->context.kind != ARG_NONE && arg(&g, &cfg->context, &cx))
        context = (__s64)cx;
    if (!rate_allows(cfg, t0, cfg->entry_only ? len : 2 * len)) {
        outcome = S_RATE_CAPPED;
        goto out;
    }
    __u64 *seqp = global(G_SEQ), *in_ring = global(G_IN_RING);
    if (!seqp || !in_ring)
        goto out;
    /* the count bounds pages put in the ring, not pages the ring had no room for (a few CPUs at
     * once may pass this test together: the window counts the few extra as not kept) */
    if (*in_ring >= cfg->max_captures) {
        outcome = S_OVER_LIMIT;
        goto out;
    }
    __u64 id = bpf_get_current_pid_tgid();
    __u64 after_out = 0, owed = 0;
    if (!cfg->entry_only) {
        struct inflight *earlier = bpf_map_lookup_elem(&calls, &id);
        if (earlier) {  /* a call on this thread that never returned (nested, or unwound past): its room goes */
            give_back(earlier->promised);
            bpf_map_delete_elem(&calls, &id);
        }
        if (arg(&g, &cfg->after, &after_out))
            owed = ring_bytes_of((__u32)len);
    }
    if (!room_for(ring_bytes_of((__u32)len), owed))
        goto out;  /* no room for this entry and its return: lost */
    __u64 seq = __sync_fetch_and_add(seqp, 1) + 1;
    if (!emit(REC_BEFORE, seq, pgno, context, src, (__u32)len, t0)) {
        give_back(owed);
        goto out;  /* the ring is full: lost */
    }
    __sync_fetch_and_add(in_ring, 1);
    outcome = S_EMITTED;
    if (owed) {
        struct inflight call = {.seq = seq, .out = after_out, .pgno = pgno, .context = context, .len = (__u32)len,
                                .promised = (__u32)owed};
        if (bpf_map_update_elem(&calls, &id, &call, BPF_ANY))
            give_back(owed);
    }
out:
    bump(outcome, 1);
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
        /* written while its room is still promised, then the room is given back */
        if (!emit(REC_AFTER, c.seq, c.pgno, c.context, c.out, c.len, t0))
            bump(S_LOST_RETURN, 1);
        give_back(c.promised);
    }
    bump(S_PROG_NS, bpf_ktime_get_ns() - t0);
    return 0;
}
