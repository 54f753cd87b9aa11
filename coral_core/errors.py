"""The one exception type that means "the user can fix this"."""


class UserError(Exception):
    """A problem the user caused (bad flag, bad config, missing data).

    The CLI prints ``str(error)`` as one line on stderr and exits with status 2; anything
    else that escapes is a bug and keeps its traceback.
    """

    exit_code = 2
