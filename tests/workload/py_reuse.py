# A code object freed and its memory given to another (test_python_reuse:
# tests/test_python.c, docs/unwinding.md "Python"): warm() runs for argv[1] seconds under
# run_warm(), then its code object is freed and hot()'s, made the same way
# (code.replace(): the same size, and pymalloc hands the freed block out
# first), takes its address; hot() runs for argv[2] seconds under run_hot().
# Prints "reuse 1" when hot()'s code object is at warm()'s old address.
import sys
import time
import types


def body(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def make(name, first):
    code = body.__code__
    if sys.version_info >= (3, 11):
        code = code.replace(co_name=name, co_qualname=name, co_firstlineno=first)
    else:
        code = code.replace(co_name=name, co_firstlineno=first)
    return types.FunctionType(code, globals(), name)


def run_warm(f, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        f(20000)


def run_hot(f, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        f(20000)


def main():
    warm = make("warm", 100)
    addr = id(warm.__code__)
    run_warm(warm, float(sys.argv[1]))
    del warm
    hot = make("hot", 200)
    print("reuse", int(id(hot.__code__) == addr), flush=True)
    run_hot(hot, float(sys.argv[2]))


if __name__ == "__main__":
    main()
