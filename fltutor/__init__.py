"""fltutor: notebook-first tutorials on personalized, fair and private federated learning.

Modules follow the data: data -> partition -> models -> client -> aggregators -> simulate
-> experiments -> metrics -> plots. Each imports only modules to its left; paper_tables holds
the papers' printed numbers and imports nothing.
"""
__version__ = "0.1.0"
