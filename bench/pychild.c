// SPDX-License-Identifier: MIT
#include "pychild.h"

#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t py_child(const char *script, char *line, size_t len, int *ret_in)
{
	int in[2], out[2];
	FILE *f;
	pid_t pid;

	if (len < 2 || pipe(in) < 0)
		return 0;
	if (pipe(out) < 0) {
		close(in[0]);
		close(in[1]);
		return 0;
	}
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		execlp("python3", "python3", "-c", script, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f = pid > 0 ? fdopen(out[0], "r") : NULL;
	if (!f || !fgets(line, (int)len, f)) {
		if (f)
			fclose(f);
		else
			close(out[0]);
		close(in[1]);
		if (pid > 0)
			waitpid(pid, NULL, 0);
		return 0;
	}
	fclose(f);
	*ret_in = in[1];
	return pid;
}
