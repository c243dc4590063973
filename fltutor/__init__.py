"""fltutor: notebook-first tutorials on personalized, fair and private federated learning.

Modules follow the data: data -> partition -> models -> client -> aggregators -> simulate
-> metrics -> plots. Each imports only modules to its left.
"""
__version__ = "0.1.0"
