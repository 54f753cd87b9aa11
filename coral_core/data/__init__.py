"""Where data sets live: fetching a pinned archive into the user cache (`fetch`), and what
`coral datasets` tells about them (`catalog`)."""
