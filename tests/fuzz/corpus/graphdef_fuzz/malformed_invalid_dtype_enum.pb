

xPlaceholder*
dtype0M