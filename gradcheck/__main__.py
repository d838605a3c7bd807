"""`python -m gradcheck`."""

from gradcheck.cli import main

main()
