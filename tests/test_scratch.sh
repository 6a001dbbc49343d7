# Scratch space of the shell tests (sourced; test_scratch() of test_util.h for
# the C ones): `. test_scratch.sh TAG` sets tmp to a fresh directory
# $TMPDIR/<CPA_TEST_NAME, else cpa-TAG>.XXXXXX ($TMPDIR defaults to /tmp) and
# traps EXIT to scratch_done. scratch_done RC removes it when RC is 0 or 77 (the
# test passed or skipped), else keeps it and prints its path; a test with an
# EXIT trap of its own calls it from there.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/${CPA_TEST_NAME:-cpa-$1}.XXXXXX")
scratch_done() {
	if [ "$1" = 0 ] || [ "$1" = 77 ]; then
		rm -rf "$tmp"
	else
		echo "test scratch kept: $tmp" >&2
	fi
}
trap 'scratch_done $?' EXIT
