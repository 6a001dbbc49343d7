// SPDX-License-Identifier: MIT
/*
 * SVG flamegraph: one self-contained file (inline CSS and script), an
 * icicle (root at the top, so the widest frames open in view, and the image
 * only as tall as the frames drawn), children in name order, width = time (on-CPU samples x period
 * + off-CPU ns). Every frame is a <g> with a <title> (what a hover shows),
 * a <rect> and a <text>; its position in the whole graph is kept in
 * data-x/data-w (fractions) so the script can zoom without the data.
 *
 * Frames narrower than a pixel are not drawn one by one: the narrow
 * children of a parent are merged into one "[N merged]" frame (drawn when it
 * is a pixel or wider), and the graph's subtitle says how many frames that
 * hid. Off-CPU frames (more blocked time than on-CPU time) get a blue
 * palette, kernel frames an orange one, labels grey. With a diff base the
 * width is the mean of the two normalised profiles and the colour says
 * which way a frame moved: red grew, blue shrank (share of its own total).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "export_int.h"

#define FRAME_H 16
#define PAD_TOP 50
#define PAD_BOT 34
#define PAD_X	10

struct svg {
	struct exporter *e;
	FILE *f;
	double *tot[2]; /* per node: time (self + descendants), per side */
	uint32_t *size; /* per node: nodes in its subtree */
	double sum[2];	/* root totals */
	bool diff, any_off;
	double width; /* drawable width in px */
	uint32_t height;
	double scale_max_delta;
	uint64_t drawn;
	bool dry;	    /* a pass that only measures: no output, no stats */
	uint32_t max_drawn; /* deepest depth drawn (the dry pass's result) */
};

/* Characters (UTF-8 code points, a stray byte counts one) in s. */
static size_t text_chars(const char *s)
{
	size_t n = 0, k;

	for (; *s; s += k ? k : 1, n++)
		k = export__utf8_len(s);
	return n;
}

/*
 * At most max characters of s as XML text, then more when s was longer:
 * markup characters escaped, control characters (XML 1.0 forbids them) as
 * spaces, bytes that are not UTF-8 as U+FFFD.
 */
static void xml_text(FILE *f, const char *s, size_t max, const char *more)
{
	size_t n = 0, k;

	for (; *s && n < max; s += k ? k : 1, n++) {
		k = export__utf8_len(s);
		switch (*s) {
		case '&':
			fputs("&amp;", f);
			break;
		case '<':
			fputs("&lt;", f);
			break;
		case '>':
			fputs("&gt;", f);
			break;
		case '"':
			fputs("&quot;", f);
			break;
		case '\'':
			fputs("&apos;", f);
			break;
		default:
			if (!k)
				fputs("\xef\xbf\xbd", f); /* U+FFFD */
			else if ((unsigned char)*s < 0x20)
				fputc(' ', f);
			else
				fwrite(s, 1, k, f);
		}
	}
	if (*s)
		fputs(more, f);
}

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/* The value a frame is drawn with: time, or in a diff the mean of both shares. */
static double node_value(const struct svg *g, uint32_t i)
{
	if (!g->diff)
		return g->tot[0][i];
	return ((g->sum[0] > 0 ? g->tot[0][i] / g->sum[0] : 0) +
		(g->sum[1] > 0 ? g->tot[1][i] / g->sum[1] : 0)) /
	       2;
}

static double node_delta(const struct svg *g, uint32_t i)
{
	return (g->sum[0] > 0 ? g->tot[0][i] / g->sum[0] : 0) -
	       (g->sum[1] > 0 ? g->tot[1][i] / g->sum[1] : 0);
}

static void fill_of(const struct svg *g, const struct tnode *nd, uint32_t i, const char *name,
		    char *buf, size_t len)
{
	uint32_t h = name_hash(name);
	int v1 = (int)(h & 0xff), v2 = (int)((h >> 8) & 0xff);

	if (g->diff) {
		double d = node_delta(g, i),
		       t = g->scale_max_delta > 0 ? fabs(d) / g->scale_max_delta : 0;
		int c = (int)(255 - 200 * MIN(t, 1.0));

		if (d > 0)
			snprintf(buf, len, "rgb(255,%d,%d)", c, c);
		else if (d < 0)
			snprintf(buf, len, "rgb(%d,%d,255)", c, c);
		else
			snprintf(buf, len, "rgb(250,250,250)");
	} else if (nd->flags & (TN_LABEL | TN_MARKER)) {
		snprintf(buf, len, "rgb(%d,%d,%d)", 170 + v1 % 30, 170 + v1 % 30, 185 + v1 % 30);
	} else if (g->tot[1][i] * 2 > g->tot[0][i]) {
		/* mostly off-CPU time below this frame (tot[1] = off-CPU time here) */
		snprintf(buf, len, "rgb(%d,%d,%d)", 50 + v1 % 70, 110 + v2 % 90, 220 + v1 % 35);
	} else if (nd->flags & TN_KERNEL) {
		snprintf(buf, len, "rgb(230,%d,40)", 140 + v1 % 60);
	} else {
		/* flamegraph.pl's "hot" palette */
		snprintf(buf, len, "rgb(%d,%d,%d)", 205 + v1 % 51, v2 * 230 / 255, v1 % 56);
	}
}

static void svg_frame(struct svg *g, double x, double w, uint32_t depth, const char *name,
		      const char *fill, const char *title_extra)
{
	/* icicle: the root on top, where the file opens */
	double y = PAD_TOP + (double)depth * FRAME_H;
	FILE *f = g->f;
	size_t chars = w > 14 ? (size_t)((w - 6) / 7) : 0;

	if (g->dry) {
		g->max_drawn = MAX(g->max_drawn, depth);
		return;
	}
	fprintf(f, "<g data-x=\"%.6f\" data-w=\"%.6f\" data-d=\"%u\"><title>", x / g->width,
		w / g->width, depth);
	xml_text(f, name, 4096, "...");
	fprintf(f,
		" (%s)</title><rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%d\" "
		"fill=\"%s\" rx=\"2\"/><text x=\"%.1f\" y=\"%.0f\">",
		title_extra, PAD_X + x, y, w, FRAME_H - 1, fill, PAD_X + x + 3, y + 11.5);
	/* as many characters as fit, the last two ".." when cut (the script's fit()) */
	if (chars >= 3)
		xml_text(f, name, text_chars(name) <= chars ? chars : chars - 2, "..");
	fputs("</text></g>\n", f);
	g->drawn++;
}

static void fmt_value(const struct svg *g, uint32_t i, char *buf, size_t len)
{
	const struct exporter *e = g->e;

	if (g->diff) {
		double a = g->sum[1] > 0 ? 100.0 * g->tot[1][i] / g->sum[1] : 0,
		       b = g->sum[0] > 0 ? 100.0 * g->tot[0][i] / g->sum[0] : 0;

		snprintf(buf, len, "base %.2f%%, new %.2f%%, %+.2f points", a, b, b - a);
	} else if (!g->any_off && e->o.freq) {
		uint64_t per = 1000000000ull / e->o.freq;

		snprintf(buf, len, "%.0f samples, %.2f%%", g->tot[0][i] / (double)per,
			 100.0 * g->tot[0][i] / g->sum[0]);
	} else {
		snprintf(buf, len, "%.3f ms, %.2f%%", g->tot[0][i] / 1e6,
			 100.0 * g->tot[0][i] / g->sum[0]);
	}
}

/* Draw node i at x (px) with width w and its children; depth-first with a stack. */
static int draw(struct svg *g, uint32_t root)
{
	const struct tree *t = &g->e->tree;
	struct item {
		uint32_t node;
		double x;
	} * stk;
	size_t n = 0;
	double total = node_value(g, root);
	char fill[40], val[96];

	if (total <= 0)
		return 0;
	stk = malloc(((size_t)t->n + 1) * sizeof(*stk));
	if (!stk)
		return -ENOMEM;
	stk[n++] = (struct item){root, 0};
	while (n) {
		struct item it = stk[--n];
		const struct tnode *nd = &t->nodes[it.node];
		double w = node_value(g, it.node) / total * g->width, cx = it.x, mw = 0;
		uint32_t c, nmerged = 0;
		uint64_t hidden = 0;

		if (it.node == root) {
			fmt_value(g, it.node, val, sizeof(val));
			svg_frame(g, 0, g->width, 0, "all", "rgb(200,200,210)", val);
		} else {
			fill_of(g, nd, it.node, tree__name(t, it.node), fill, sizeof(fill));
			fmt_value(g, it.node, val, sizeof(val));
			svg_frame(g, it.x, w, nd->depth, tree__name(t, it.node), fill, val);
		}
		/* Children left to right; narrow ones merge into one "[N merged]". */
		for (c = nd->first_child; c; c = t->nodes[c].next_sibling) {
			double cw = node_value(g, c) / total * g->width;

			if (cw < 1.0) {
				mw += cw;
				nmerged++;
				continue;
			}
			stk[n++] = (struct item){c, cx};
			cx += cw;
		}
		if (nmerged) {
			/* Count what merging hid: the merged frames and everything above them. */
			for (c = nd->first_child; c; c = t->nodes[c].next_sibling)
				if (node_value(g, c) / total * g->width < 1.0)
					hidden += g->size[c];
			if (!g->dry)
				g->e->st.merged += hidden;
			if (!g->diff && !g->dry)
				g->e->st.merged_value += (uint64_t)(mw / g->width * total);
			if (mw >= 1.0) {
				char nm[64];

				snprintf(nm, sizeof(nm), "[%u merged]", nmerged);
				snprintf(val, sizeof(val),
					 "%u frames narrower than a pixel, %.2f%%", nmerged,
					 100.0 * mw / g->width);
				svg_frame(g, cx, mw, nd->depth + 1, nm, "rgb(220,220,220)", val);
			}
		}
	}
	free(stk);
	return 0;
}

static const char svg_script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"'use strict';\n"
	"var W, frames, details, matchedEl, zoomed = null;\n"
	"function q(s) { return document.getElementById(s); }\n"
	"function fit(g, x, w) {\n"
	"  var r = g.querySelector('rect'), t = g.querySelector('text');\n"
	"  var name = g.querySelector('title').textContent.replace(/ \\([^(]*\\)$/, '');\n"
	"  r.setAttribute('x', (PADX + x).toFixed(1)); r.setAttribute('width', w.toFixed(1));\n"
	"  t.setAttribute('x', (PADX + x + 3).toFixed(1));\n"
	"  var n = Math.floor((w - 6) / 7);\n"
	"  t.textContent = n < 3 ? '' : name.length <= n ? name : name.substr(0, n - 2) + '..';\n"
	"}\n"
	"function zoom(g) {\n"
	"  var x0 = +g.dataset.x, w0 = +g.dataset.w, d0 = +g.dataset.d;\n"
	"  zoomed = g;\n"
	"  frames.forEach(function (f) {\n"
	"    var x = +f.dataset.x, w = +f.dataset.w, d = +f.dataset.d;\n"
	"    var inside = x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9;\n"
	"    if (d >= d0 && inside) { f.style.display = ''; fit(f, (x - x0) / w0 * W, w / w0 * W); }\n"
	"    else if (d < d0 && x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9) {\n"
	"      f.style.display = ''; f.classList.add('parent'); fit(f, 0, W); }\n"
	"    else f.style.display = 'none';\n"
	"  });\n"
	"  q('unzoom').style.display = '';\n"
	"}\n"
	"function unzoom() {\n"
	"  zoomed = null;\n"
	"  frames.forEach(function (f) { f.style.display = ''; f.classList.remove('parent');\n"
	"    fit(f, +f.dataset.x * W, +f.dataset.w * W); });\n"
	"  q('unzoom').style.display = 'none';\n"
	"}\n"
	"function search(re) {\n"
	"  var spans = [], m = 0;\n"
	"  frames.forEach(function (f) {\n"
	"    var name = f.querySelector('title').textContent.replace(/ \\([^(]*\\)$/, '');\n"
	"    var hit = re !== null && re.test(name);\n"
	"    f.classList.toggle('match', hit);\n"
	"    if (hit) spans.push([+f.dataset.x, +f.dataset.x + +f.dataset.w]);\n"
	"  });\n"
	"  /* The matched share counts nested matches once: union of the spans. */\n"
	"  spans.sort(function (a, b) { return a[0] - b[0]; });\n"
	"  var end = -1;\n"
	"  spans.forEach(function (s) {\n"
	"    if (s[0] >= end) { m += s[1] - s[0]; end = s[1]; }\n"
	"    else if (s[1] > end) { m += s[1] - end; end = s[1]; }\n"
	"  });\n"
	"  matchedEl.textContent = re === null ? '' : 'Matched: ' + (100 * m).toFixed(2) + '%';\n"
	"  return m;\n"
	"}\n"
	"function askSearch() {\n"
	"  var s = prompt('Search (regular expression)', '');\n"
	"  if (s === null) return;\n"
	"  if (s === '') { search(null); return; }\n"
	"  try { search(new RegExp(s)); } catch (err) { matchedEl.textContent = 'bad regexp'; }\n"
	"}\n"
	"function init() {\n"
	"  W = +document.documentElement.dataset.w;\n"
	"  frames = Array.prototype.slice.call(document.querySelectorAll('#frames > g'));\n"
	"  details = q('details'); matchedEl = q('matched');\n"
	"  frames.forEach(function (f) {\n"
	"    f.addEventListener('mouseover', function () {\n"
	"      details.textContent = f.querySelector('title').textContent; });\n"
	"    f.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
	"    f.addEventListener('click', function () { zoom(f); });\n"
	"  });\n"
	"  q('unzoom').addEventListener('click', unzoom);\n"
	"  q('search').addEventListener('click', askSearch);\n"
	"  document.addEventListener('keydown', function (ev) {\n"
	"    if ((ev.ctrlKey || ev.metaKey) && ev.key === 'f') { ev.preventDefault(); askSearch(); }\n"
	"    if (ev.key === 'Escape') { search(null); unzoom(); }\n"
	"  });\n"
	"  window.cpaSearch = search; window.cpaZoom = zoom;\n"
	"  /* file.svg#search=REGEXP: highlight on open (a link to share) */\n"
	"  var h = /^#search=(.*)$/.exec(location.hash);\n"
	"  if (h) document.documentElement.setAttribute('data-cpa-matched',\n"
	"    (100 * search(new RegExp(decodeURIComponent(h[1])))).toFixed(2));\n"
	"  document.documentElement.setAttribute('data-cpa-ready', String(frames.length));\n"
	"}\n"
	"var PADX = 10;\n"
	"init();\n"
	"]]></script>\n";

int export_svg__write(struct exporter *e, FILE *f)
{
	struct tree *t = &e->tree;
	struct svg g = {.e = e, .f = f, .diff = e->have_base};
	uint32_t i, width = e->o.width ? e->o.width : 1200;
	int r, s;

	r = tree__link(t);
	if (r < 0)
		return export__fail(e, r, "svg: out of memory");
	g.size = calloc(t->n, sizeof(uint32_t));
	for (s = 0; s < 2; s++) {
		g.tot[s] = calloc(t->n, sizeof(double));
		if (!g.tot[s] || !g.size) {
			r = export__fail(e, -ENOMEM, "svg: out of memory");
			goto out;
		}
	}
	/* Parents have smaller ids than their children: sum from the leaves up. */
	for (i = t->n; i-- > 0;) {
		for (s = 0; s < 2; s++) {
			g.tot[s][i] += (double)tval_time(&t->nodes[i].self[s], e->o.freq);
			if (i)
				g.tot[s][t->nodes[i].parent] += g.tot[s][i];
		}
		g.size[i]++;
		if (i)
			g.size[t->nodes[i].parent] += g.size[i];
		if (t->nodes[i].self[0].off)
			g.any_off = true;
	}
	g.sum[0] = g.tot[0][0];
	g.sum[1] = g.tot[1][0];
	if (g.diff) {
		for (i = 1; i < t->n; i++)
			g.scale_max_delta = MAX(g.scale_max_delta, fabs(node_delta(&g, i)));
	} else {
		/* Off-CPU palette: tot[1] is free without a base: reuse it for off time. */
		memset(g.tot[1], 0, t->n * sizeof(double));
		for (i = t->n; i-- > 0;) {
			g.tot[1][i] += (double)t->nodes[i].self[0].off;
			if (i)
				g.tot[1][t->nodes[i].parent] += g.tot[1][i];
		}
	}
	g.width = width - 2 * PAD_X;
	/* As tall as what is drawn: frames narrower than a pixel do not count. */
	g.dry = true;
	r = draw(&g, 0);
	g.dry = false;
	if (r < 0) {
		r = export__fail(e, r, "svg: out of memory");
		goto out;
	}
	g.height = (g.max_drawn + 1) * FRAME_H + PAD_TOP + PAD_BOT;
	fprintf(f,
		"<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%u\" height=\"%u\" viewBox=\"0 0 %u %u\" "
		"xmlns=\"http://www.w3.org/2000/svg\" data-w=\"%.1f\">\n"
		"<style type=\"text/css\">\n"
		"text { font-family: monospace; font-size: 12px; fill: rgb(0,0,0); }\n"
		"#frames g:hover rect { stroke: black; stroke-width: 0.5; cursor: pointer; }\n"
		"#frames text { pointer-events: none; }\n"
		"#frames g.match rect { fill: rgb(230,0,230); }\n"
		"#frames g.parent rect { opacity: 0.5; }\n"
		".button { cursor: pointer; fill: rgb(0,0,160); }\n"
		"</style>\n",
		width, g.height, width, g.height, g.width);
	fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"rgb(248,248,240)\"/>\n",
		width, g.height);
	fputs("<text x=\"", f);
	fprintf(f, "%u\" y=\"20\" text-anchor=\"middle\" style=\"font-size:16px\">", width / 2);
	xml_text(f, e->o.title ? e->o.title : g.diff ? "cpa diff" : "cpa", 512, "...");
	fputs("</text>\n", f);
	fprintf(f,
		"<text id=\"unzoom\" class=\"button\" x=\"%d\" y=\"20\" style=\"display:none\">"
		"Reset Zoom</text>\n",
		PAD_X);
	fprintf(f,
		"<text id=\"search\" class=\"button\" x=\"%u\" y=\"20\" text-anchor=\"end\">"
		"Search</text>\n",
		width - PAD_X);
	fprintf(f, "<text id=\"matched\" x=\"%u\" y=\"%u\" text-anchor=\"end\"> </text>\n",
		width - PAD_X, g.height - 10);
	fprintf(f, "<text id=\"details\" x=\"%d\" y=\"%u\"> </text>\n", PAD_X, g.height - 10);
	/* Subtitle placeholder: the merge count is known only after drawing. */
	fputs("<g id=\"frames\">\n", f);
	r = draw(&g, 0);
	if (r < 0) {
		r = export__fail(e, r, "svg: out of memory");
		goto out;
	}
	fputs("</g>\n", f);
	fprintf(f,
		"<text id=\"subtitle\" x=\"%u\" y=\"38\" text-anchor=\"middle\" "
		"style=\"fill:rgb(90,90,90)\">",
		width / 2);
	if (g.diff)
		fputs("red: grew, blue: shrank (share of each range's total); ", f);
	else if (g.any_off)
		fputs("blue: off-CPU; ", f);
	fprintf(f, "%llu frames drawn, %llu narrower than a pixel merged",
		(unsigned long long)g.drawn, (unsigned long long)e->st.merged);
	/* the policy triggers of the range (a line of its own when there is room) */
	for (i = 0; i < e->n_trig; i++) {
		char text[512];

		export__trigger_text(&e->trig[i], text, sizeof(text));
		fputs(i ? "; " : "; policy triggers: ", f);
		xml_text(f, text, sizeof(text), "...");
	}
	fputs("</text>\n", f);
	fputs(svg_script, f);
	fputs("</svg>\n", f);
	for (i = 1; i < t->n; i++)
		if (tval_time(&t->nodes[i].self[0], 1) || tval_time(&t->nodes[i].self[1], 1))
			e->st.stacks++;
	r = 0;
out:
	free(g.tot[0]);
	free(g.tot[1]);
	free(g.size);
	return r;
}
