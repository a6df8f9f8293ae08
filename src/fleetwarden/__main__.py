"""``python -m fleetwarden``: the command line, as the ``fleetwarden`` console script."""

from fleetwarden.cli.main import main

if __name__ == "__main__":
    main()
