/* SPDX-License-Identifier: MIT */
/*
 * Private to the store library: the metrics section's encoder and decoder
 * (storer/store_metrics.c, docs/store-format.md "Metrics section").
 */
#ifndef CPA_STORE_METRICS_PVT_H
#define CPA_STORE_METRICS_PVT_H

#include <stddef.h>
#include <stdint.h>

#include "shm/records.h"
#include "store.h"
#include "store_fmt.h"

/* Append one CPA_REC_METRICS record (header + its entries) to b, in the
 * columnar encoding (v4): the records appended to b in a row make one group,
 * rewritten whole at each (b's bytes from the group's start change). */
void store_metrics__encode(struct sbuf *b, const struct cpa_metrics *m,
			   const struct cpa_metrics_ent *ents);
/* The same in the first encoding (v1), which released stores hold, in the
 * per-record compact one (v2) of development builds and in v3: for the tests
 * and benches that check the reader takes them and compare the sizes. */
void store_metrics__encode_v1(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents);
void store_metrics__encode_v2(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents);
void store_metrics__encode_v3(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents);
void store_metrics__encode_v4(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents);
/* Tests: a version other than 5 in the groups store_metrics__encode()
 * writes (0: 5), as a newer writer would (the group's layout stays v5's). */
extern unsigned int store_metrics__test_version;
/* The columns of the v4 or v5 group last encoded (n of them), for the bench. */
const struct sbuf *store_metrics__v4_columns(unsigned int *n);
const struct sbuf *store_metrics__v5_columns(unsigned int *n);
/* Append one CPA_REC_EVENT record to b. */
void store_metrics__encode_event(struct sbuf *b, const struct cpa_policy_event *ev);
/* Where the metrics section starts in a decoded data section (after the rows). */
int store_metrics__offset(const uint8_t *p, size_t len, size_t *ret_off);
/* Every record of a metrics section with time_ns in [t0_ns, t1_ns) to fn,
 * and every event to efn (either may be NULL): 0, STORE_METRICS_NEWER when
 * the section held groups of a version newer than this reader knows (their
 * records skipped, the others and the events read), or -errno. */
#define STORE_METRICS_NEWER 1
int store_metrics__decode(const uint8_t *p, size_t len, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, store_event_fn efn, void *ctx);

#endif /* CPA_STORE_METRICS_PVT_H */
