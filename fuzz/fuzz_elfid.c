/* SPDX-License-Identifier: MIT */
/* An ELF image -> unwindd's build-id reader, from memory and from a memfd. */
#include <unistd.h>

#include "fuzz_util.h"
#include "unwindd/elfid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int inited;
	uint8_t id[ELFID_MAX], len = 0;
	int fd;

	if (!inited) {
		if (elfid__init() < 0)
			__builtin_trap();
		inited = 1;
	}
	if (elfid__from_mem(data, size, id, &len) == 0 && len > ELFID_MAX)
		__builtin_trap();
	fd = fuzz__memfd(data, size);
	if (elfid__from_fd(fd, id, &len) == 0 && len > ELFID_MAX)
		__builtin_trap();
	close(fd);
	return 0;
}
