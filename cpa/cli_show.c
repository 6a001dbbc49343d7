// SPDX-License-Identifier: MIT
/*
 * `cpa show`: the CLI half. Options were parsed and validated by opts.c; the
 * export itself is show_run() in show.c.
 */
#include <string.h>

#include "cli.h"
#include "show.h"

int cmd_show(struct cpa_opts *o)
{
	const struct show_cli *c = &o->show;
	struct show_opts so = {
		.read = c->read,
		.starttime = c->starttime,
		.endtime = c->endtime,
		.output_num = c->output_num,
		.output_prof = c->output_prof,
		.show_range = c->show_range,
		.show_thread_name = c->show_thread_name,
		.no_pid = c->no_pid,
		.no_env = c->no_env,
		.show_raw = c->show_raw,
		.use_cache = c->use_cache,
		.split_path = c->split_path,
		.target_pid = c->target_pid,
		.target_comm = c->target_comm,
		.target_env = c->target_env,
		.target_cpu = c->target_cpu,
		.target_cgroup_id = c->target_cgroup_id,
		.kind = !c->kind		  ? SHOW_KIND_AUTO
			: !strcmp(c->kind, "on")  ? SHOW_KIND_ON
			: !strcmp(c->kind, "off") ? SHOW_KIND_OFF
						  : SHOW_KIND_ALL,
		.verbose = o->verbose,
	};

	return show_run(&so) < 0 ? 1 : 0;
}
