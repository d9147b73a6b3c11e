

xPlaceholder