import sys

from autellix.cli import main

sys.exit(main())
