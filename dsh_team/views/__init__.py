"""Read models of a Team: the browser projection and remote operations, and the offline ``dsh team show``.
"""
