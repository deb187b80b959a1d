import sys

from coursetools.hub.cli import main

sys.exit(main())
