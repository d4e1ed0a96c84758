"""The gatherx benchmark as a script: the same as ``gatherx bench`` (see --help)."""

from gatherx.bench import main

if __name__ == "__main__":
    raise SystemExit(main())
