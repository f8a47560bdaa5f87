"""``elicitation-gateway hash-password``: an argon2 hash of a password, for the people file.

The password is read from the terminal without echo, or from standard input's first line when that is
not a terminal; never from the command line, where other users of the machine and the shell's history
would see it.
"""

import argparse
import getpass
import sys

from elicitation_gateway.people import hash_password

PROG = "elicitation-gateway hash-password"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Print an argon2 hash of a password, to put in the people file (GATEWAY_PEOPLE) as "
        '`password = "<hash>"`. The password is asked for (or read from standard input\'s first line).',
    )
    parser.parse_args(argv)
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
        if getpass.getpass("Again: ") != password:
            print(f"{PROG}: the two passwords differ", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().removesuffix("\n").removesuffix("\r")
    if not password:
        print(f"{PROG}: the password is empty", file=sys.stderr)
        return 1
    print(hash_password(password))
    return 0
