# Many code objects sampled at once (tests/test_python.c test_python_many,
# docs/unwinding.md "Python"): CHAINS chains of DEPTH distinct functions
# cK_0() -> cK_1() -> ... -> cK_59() -> spin(), one chain after the other,
# each ~10 ms, for argv[1] seconds: every sample brings ~60 code objects
# capture has not read, more per poll than its read budget.
import sys
import time

CHAINS = 500
DEPTH = 60


def spin(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


src = []
for c in range(CHAINS):
    for d in range(DEPTH - 1):
        src.append(f"def c{c}_{d}(n):\n    return c{c}_{d + 1}(n)\n")
    src.append(f"def c{c}_{DEPTH - 1}(n):\n    return spin(n)\n")
exec(compile("".join(src), "py_many_chains", "exec"))
chains = [globals()[f"c{c}_0"] for c in range(CHAINS)]


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    k = 0
    while time.monotonic() < end:
        chains[k % CHAINS](20000)
        k += 1


main()
