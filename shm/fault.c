// SPDX-License-Identifier: MIT
/* The CPA_FAULT_KILL_AFTER_COMMIT test knob; documented in fault.h. */
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int shm_fault__kill_after_commit(enum shm_stage_id id, uint32_t generation)
{
	const char *v = getenv(SHM_FAULT_KILL_ENV);
	int found = 0;

	if (!v || !*v)
		return 0;
	while (*v) {
		unsigned int n, g;
		int used = 0;
		const char *p = strchr(v, ':');
		enum shm_stage_id who = p ? shm_stage_by_name(v, (size_t)(p - v)) : SHM_STAGE_MAX;

		if (who == SHM_STAGE_MAX || sscanf(p, ":%u:%u%n", &n, &g, &used) != 2 || !n ||
		    n > 1u << 30)
			return -EINVAL;
		p += used;
		if (*p && (*p != ',' || !p[1]))
			return -EINVAL;
		if (who == id && generation <= g)
			found = (int)n;
		v = *p ? p + 1 : p;
	}
	return found;
}
