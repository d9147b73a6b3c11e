
:
xPlaceholder*
shape:€€€€€€€€*
dtype0