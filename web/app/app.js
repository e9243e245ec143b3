// inboxd web client
