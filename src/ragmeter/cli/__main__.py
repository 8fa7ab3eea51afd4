"""``python -m ragmeter.cli ...``: the ``ragmeter`` command (as ``python -m ragmeter``)."""

from ragmeter.cli import main

main()
