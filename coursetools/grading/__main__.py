import sys

from coursetools.grading.grade import main

sys.exit(main())
