import sys

from ensdiv.cli import main

sys.exit(main())
