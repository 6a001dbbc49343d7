# A Python program with a known hot function: a() -> b() -> hot(), for
# argv[1] seconds (tests/test_python.c, docs/unwinding.md "Python").
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
    main()
