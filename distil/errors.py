class DistilError(Exception):
    """A problem the user can fix; reported as one line, never as a traceback.

    The message says what is wrong and how to fix it.
    """
