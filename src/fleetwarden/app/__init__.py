"""The application shell: orchestration of reading, diffing, deciding and acting.

It imports core (and ports); the I/O it needs is passed in as callables or port objects.
"""
