"""Named reads of the store: the CLI's and the app's only way in.

``frames`` returns the job input frames; ``materialize`` keeps the job results up to date and
reads them; ``stats`` and ``findings`` assemble the SPEC 5.3 objects; ``app`` holds the narrow
reads the app's pages need. Reads only: the projector (``analytics.store``) writes.
"""
