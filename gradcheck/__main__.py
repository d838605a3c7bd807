"""`python -m gradcheck` (gradcheck/__init__.py moves the current folder, which `python -m`
puts first on sys.path, to the end)."""

from gradcheck.cli import main

main()
