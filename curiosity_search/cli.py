"""Command line: placeholder until the CLI module lands."""


def main() -> int:
    print("curiosity-search: not built yet")
    return 0
