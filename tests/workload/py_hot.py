# A Python program with a known hot function: a() -> b() -> hot(), for
# argv[1] seconds (tests/test_python.c, docs/unwinding.md "Python"). With
# argv[2] = FILE it forks first: the child runs it and its pid goes to FILE,
# the parent waits for it.
import os
import sys
import time


def hot(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def b(n):
    return hot(n)


def a(n):
    return b(n)


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    while time.monotonic() < end:
        a(20000)


if __name__ == "__main__":
    if len(sys.argv) > 2:
        child = os.fork()
        if child:
            with open(sys.argv[2] + ".tmp", "w") as f:
                f.write(str(child))
            os.rename(sys.argv[2] + ".tmp", sys.argv[2])
            os._exit(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]))
    main()
