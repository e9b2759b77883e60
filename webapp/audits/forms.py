from django import forms

from webapp.audits.models import Label


class LabelForm(forms.Form):
    step = forms.IntegerField(required=False)
    label = forms.ChoiceField(choices=Label.Value.choices)
    comment = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    seconds_spent = forms.IntegerField(required=False, min_value=0)
