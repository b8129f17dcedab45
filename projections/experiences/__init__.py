"""The KnowHub experiences projection: schema, sink, projector over ``experience-events``, queries.
"""
