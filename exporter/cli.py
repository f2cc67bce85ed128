def main(argv=None) -> int:  # replaced below
    return 0
