"""``python -m ragmeter``: the ``ragmeter`` command line."""

from ragmeter.cli import main

if __name__ == "__main__":
    main()
