import sys

from utils.grading.grade import main

sys.exit(main())
